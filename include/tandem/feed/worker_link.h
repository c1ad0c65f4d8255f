// The feed's policy for one data worker, above the thin transport::WorkerClient: is it
// the worker this feed expects (identity), and, as a source of the Scheduler, what to do
// when its stream breaks (retry with backoff and take it back once it answers serving
// the same dataset, or drop it for good). Plain logic: tests drive it with a fake client.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tandem/common/backoff.h"
#include "tandem/data/core/dataset.h"
#include "tandem/feed/scheduler.h"
#include "tandem/transport/worker_client.h"

namespace tandem::feed {

// What differs between a worker's description and the dataset a feed expects, in words:
// the settings that differ ("image size 64, this trainer expects 32 (--image-size)"), or
// both fingerprints when the worker does not say what its fingerprint is made of (an
// older tandem); empty when it serves exactly that dataset (fingerprint and size).
// `who` names the feed's side ("this trainer", "this feed").
std::string identity_problem(const transport::WorkerInfo& worker, const data::DatasetInfo& expected,
                             std::string_view who = "this trainer");

// A worker's description as a dataset, for a feed with no copy of the data. Throws
// PeerError naming `target` when a trainer could not build a model on it
// (data::info_problem).
data::DatasetInfo dataset_of(const transport::WorkerInfo& worker, const std::string& target);

struct LinkOptions {
  int inflight = 4;              // requests outstanding on the worker at once (its window)
  // Pauses between tries to take a lost worker back: 1 s doubling to 5 s, so that a worker
  // whose network heals is tried again within 5 s, wherever the pauses had grown to; each
  // try connects at once (its health check resets gRPC's own reconnect pause).
  BackoffOptions backoff{1, 2, 5};
  double health_deadline_s = 2;  // each health check while taking it back
  double info_deadline_s = 5;    // each identity check while taking it back
};

class WorkerLink {
 public:
  // Registers the worker as a source of `scheduler` (which outlives this). Batches that
  // do not fit `expected` (shape, labels, size) drop the worker for good.
  WorkerLink(std::unique_ptr<transport::WorkerClient> client, Scheduler& scheduler, data::DatasetInfo expected,
             LinkOptions opts);
  ~WorkerLink();  // stop()
  WorkerLink(const WorkerLink&) = delete;
  WorkerLink& operator=(const WorkerLink&) = delete;

  transport::WorkerClient& client() { return *client_; }
  // How many threads the worker said it makes batches on (Scheduler::set_threads).
  void set_threads(int threads) { scheduler_.set_threads(id_, threads); }
  const std::string& target() const { return client_->target(); }

  // Streams for the scheduler on its own threads until the scheduler runs out of work or
  // stop() is called. A stream that breaks for a transient reason hands its requests to
  // the other sources (Scheduler::fail with may_return), waits with backoff until the
  // worker answers serving the same dataset, and streams again (Scheduler::revive); a
  // final reason, a malformed batch or another dataset drops it (fail / abandon).
  // `absent`: the worker did not answer at start; it joins once it does.
  void start(bool absent);

  // Cancels the stream, ends a pause, joins the threads. Idempotent.
  void stop();

  // The worker leaves the feed for good (`why`: its address is no longer listed; or,
  // with `answers`, the worker said it is leaving): it is sent nothing more and answers
  // what it holds (Scheduler::leave); if its stream breaks first, its requests go to the
  // others; it is not retried. Thread-safe.
  void leave(const std::string& why, bool answers = false);
  // Whether it left or is leaving (leave(), or the worker said it is leaving).
  bool leaving() const { return leaving_; }
  // Whether its thread ended: it streamed all there was, left, or gave up.
  bool finished() const { return finished_; }
  // A worker that left because its address was no longer listed is listed again: the
  // same source and connection serve again once it answers serving the expected dataset
  // (Scheduler::rejoin, then revive, which checks it re-makes a batch made before).
  // REQUIRES: leaving() and finished(); not stopped.
  void rejoin();

 private:
  enum class Outcome { kDone, kTransient, kFinal };
  void run(bool absent);
  Outcome stream_once(std::string& why);  // sets bad_data_ for a request refused on its data
  bool take_back();  // false when stopping or the worker serves another dataset
  bool pause(double seconds);  // false when stopping

  std::unique_ptr<transport::WorkerClient> client_;
  Scheduler& scheduler_;
  data::DatasetInfo expected_;
  LinkOptions opts_;
  int id_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;             // ends a pause on stop()
  bool stopping_ = false;                    // GUARDED_BY(mu_)
  std::atomic<bool> leaving_{false};         // leave(), or the worker's notice
  std::atomic<bool> finished_{false};        // run() returned
  bool streamed_ = false;                    // the run thread's: it served once ("rejoined" after)
  bool bad_data_ = false;                    // the run thread's: the last stream failed on the data
  std::shared_ptr<transport::BatchCall> call_;  // GUARDED_BY(mu_): the stream, to cancel
};

}  // namespace tandem::feed
