// The trainer's side of one data worker: readiness, identity, and a stream that pulls
// requests from the Scheduler and feeds finished batches back into it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/sources/dataset.h"
#include "tandem/feed/scheduler.h"
#include "tandem/transport/worker_info.h"

namespace tandem::transport {

class RemoteWorker {
 public:
  // `target` is "address:port". Every call carries `security`'s token and job name, over
  // TLS when it names a CA.
  explicit RemoteWorker(std::string target, const SecurityOptions& security = {});
  ~RemoteWorker();  // stops the stream if it runs
  RemoteWorker(const RemoteWorker&) = delete;
  RemoteWorker& operator=(const RemoteWorker&) = delete;

  const std::string& target() const { return target_; }

  // Waits until the worker's health check answers SERVING. Throws NetworkError naming
  // the target and the fix after `timeout_s`, or Interrupted as soon as `*stop` is set.
  void wait_ready(double timeout_s, const std::atomic<bool>* stop = nullptr);

  // Asks what the worker serves. Throws NetworkError on failure.
  WorkerInfo info(double timeout_s);

  // Asks what the worker serves and returns it as a dataset description, for a trainer
  // without a copy of the data. Throws NetworkError when the worker's description is
  // unusable (data::info_problem), naming the worker.
  data::DatasetInfo learn_dataset(double timeout_s);

  // Asks what the worker serves and checks it is exactly `expected` (fingerprint and
  // size): a mismatch is a configuration mistake, a ConfigError with the fix. Logs the
  // worker as ready and returns what it said.
  WorkerInfo check_serves(const data::DatasetInfo& expected, double timeout_s);

  // Streams for `scheduler` as source `source_id` on two threads (writer and reader),
  // until the scheduler runs out of work or stop() is called. A broken stream calls
  // scheduler.fail(), so its requests go to the other sources; after a transient failure
  // (unavailable, reset, busy) the worker is retried with backoff and rejoins once it
  // answers its health check with the same dataset. With `expect`, a batch that does not
  // fit it (shape, labels, size) drops this worker for good. `absent`: the worker did not
  // answer at start; it joins when it does.
  void start(feed::Scheduler& scheduler, int source_id, const data::DatasetInfo* expect = nullptr,
             bool absent = false);

  // Cancels the stream and joins its threads. Idempotent.
  void stop();

  // Asks the worker to exit. Returns false (and logs) if it could not be reached.
  bool shutdown(const std::string& reason, double timeout_s);

 private:
  struct Impl;
  std::string target_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::transport
