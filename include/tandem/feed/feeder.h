// One data-parallel rank's feed (a RankFeed) for callers that must never block without a
// way out (the Python module): a thread of its own connects and keeps the next batches
// ready, and wait_started() and next() wait in slices the caller chooses, so it can look
// at its own signals between them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/batching/batch.h"
#include "tandem/data/sources/dataset.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/feed/scheduler.h"

namespace tandem::feed {

struct FeederOptions {
  std::vector<std::string> workers;  // data workers, "address:port"
  int rank = 0;                      // this rank's slice of every global batch
  int world = 1;                     // ranks sharing each global batch
  int local_threads = 0;             // threads of this process that make batches too
  uint64_t start_step = 0;           // first step delivered (a resumed run)
};

class Feeder {
 public:
  // Builds the dataset from `settings` (data, security, and the trainer's batch_size,
  // steps, inflight, prefetch, connect_timeout_s, batch_timeout_s), then starts a thread
  // that starts the feed (RankFeed::start) and keeps the next batches ready. Does not
  // wait for the network. Throws ConfigError for settings
  // that cannot work (no source, a bad rank, a dataset smaller than a global batch).
  Feeder(const Settings& settings, FeederOptions opts);
  ~Feeder();  // close()
  Feeder(const Feeder&) = delete;
  Feeder& operator=(const Feeder&) = delete;

  // Waits up to `seconds` until the feed serves: a worker answered with our dataset, or
  // local threads make batches (absent workers join later). True once it does. Throws
  // what connecting threw: NetworkError when no worker answered within
  // --connect-timeout or one refused us (token, job), ConfigError when a worker serves
  // another dataset.
  bool wait_started(double seconds);

  enum class Status { kBatch, kPending, kEnd };
  // Waits up to `seconds` for the next batch in sequence order. kBatch: `out` holds it.
  // kEnd: every step was delivered, or close() was called. Throws the feed's failure
  // (NetworkError naming every source's state after --batch-timeout, or when every
  // source failed for good); the feed is then over.
  Status next(double seconds, std::optional<data::Batch>& out);

  // Stops streaming and joins every thread. Idempotent; safe from any thread, also
  // while another waits in next() (it returns kEnd).
  void close();

  // Tells every worker to exit, all at once, each call bounded by kReleaseDeadlineS: a
  // hung worker costs one deadline. Several ranks share workers, so only one should. Returns how
  // many acknowledged.
  int shutdown_workers(const std::string& reason) const;

  const data::DatasetInfo& info() const { return feed_->info(); }
  // REQUIRES: wait_started() returned true.
  const data::Sampler& sampler() const { return feed_->sampler(); }
  uint64_t steps() const { return steps_; }             // total steps, including skipped ones
  uint64_t start_step() const { return opts_.start_step; }
  // REQUIRES: wait_started() returned true.
  std::vector<SourceStats> stats() const;
  uint64_t hedged() const;

 private:
  void pump();     // the feed's thread: connect, then move batches from the scheduler

  FeederOptions opts_;
  uint64_t steps_ = 0;
  std::atomic<bool> stop_{false};
  std::unique_ptr<RankFeed> feed_;  // started by pump()

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;                // GUARDED_BY(mu_)
  bool ended_ = false;                  // GUARDED_BY(mu_): the pump has finished
  std::exception_ptr error_;            // GUARDED_BY(mu_)
  std::deque<data::Batch> ready_;       // GUARDED_BY(mu_): at most kAhead
  std::mutex close_mu_;                 // one close() at a time
  std::thread pump_;
};

}  // namespace tandem::feed
