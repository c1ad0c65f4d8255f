// The owner of one rank's feed: the Scheduler, the data workers that stream into it and
// this process's own threads that make batches for it. It connects them, and ends them
// in the one order that is safe (the scheduler closes first, so nobody waits on it; then
// the sources, whose threads use it, stop and join). `tandem trainer` and the Python
// module's Feeder both build on it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/batching/batch.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/sources/dataset.h"
#include "tandem/feed/scheduler.h"
#include "tandem/transport/remote_worker.h"

namespace tandem::feed {
class LocalSource;
}

namespace tandem::transport {

struct ConnectOptions {
  double timeout_s = 180;       // no source at all after this long is an error
  int inflight = 4;             // requests outstanding per worker
  bool local = false;           // this process makes batches too: it need not wait for a worker
  double check_deadline_s = 9;  // the Info call that checks a worker's dataset
  // How the user names the timeout, for the error that says to raise it.
  std::string timeout_setting = "--connect-timeout";
};

class FeedSources {
 public:
  // A scheduler for `sampler`'s requests (`sampler` outlives this).
  FeedSources(const data::Sampler& sampler, const feed::SchedulerOptions& opts);
  ~FeedSources();  // close()
  FeedSources(const FeedSources&) = delete;
  FeedSources& operator=(const FeedSources&) = delete;

  feed::Scheduler& scheduler() { return *scheduler_; }
  const feed::Scheduler& scheduler() const { return *scheduler_; }

  // Connects to every worker in `targets` (address:port) and checks each serves `info`,
  // then starts streaming from them. Returns once a source can serve: a worker that
  // answered, or at once with opts.local; a worker that does not answer yet joins when it
  // does. Throws NetworkError when no worker answered within opts.timeout_s, ConfigError
  // when one serves another dataset, Interrupted as soon as `stop` is set.
  void connect_workers(const std::vector<std::string>& targets, const SecurityOptions& security,
                       const data::DatasetInfo& info, const ConnectOptions& opts, const std::atomic<bool>& stop);

  // Starts `threads` threads of this process making batches of `dataset` as `wire`.
  void start_local(std::shared_ptr<const data::Dataset> dataset, int threads, data::DType wire);

  const std::vector<std::unique_ptr<RemoteWorker>>& workers() const { return workers_; }

  // Ends the feed: closes the scheduler (a wait for a batch returns at once), then stops
  // the workers' streams and the local threads and joins them. Idempotent. The
  // scheduler's stats stay readable.
  void close();

 private:
  std::unique_ptr<feed::Scheduler> scheduler_;
  std::vector<std::unique_ptr<RemoteWorker>> workers_;
  std::unique_ptr<feed::LocalSource> local_;
};

}  // namespace tandem::transport
