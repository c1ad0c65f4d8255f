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

#include "tandem/data/batching/sampler.h"
#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/feed/scheduler.h"

namespace tandem::feed {

struct FeederOptions {
  std::vector<std::string> workers;  // data workers, "address:port"
  int rank = 0;                      // this rank's slice of every global batch
  int world = 1;                     // ranks sharing each global batch
  int local_threads = 0;             // threads of this process that make batches too
  uint64_t start_step = 0;           // first step delivered (a resumed run)
  // Deliver exactly this epoch (its batches_per_epoch steps from epoch x batches_per_epoch)
  // instead of steps [start_step, --steps): a pass over the data, as a DataLoader gives.
  std::optional<uint64_t> epoch;
  // Whether the settings name a dataset (data=, --data); without one and without local
  // threads the feed learns whatever its workers serve.
  bool data_given = true;
  std::string relay;  // this host's stream relay (FeedOptions::relay); "" = none
  // A state saved by an earlier feed (tandem.Feed.state_dict(): its step is start_step):
  // that feed's place in the data, at any world size or batch size. The feed's steps
  // meet the data there (data::DataAnchor), so the epoch continues from that sample.
  std::optional<data::DataPosition> resume;
};

// The RankFeed options of a Feeder: the settings' (`base`: launch/feed_settings.h, with
// the settings' directory of workers) with f's workers (at base.worker_port when they
// name none) and place, learning the dataset from the workers when this process makes no
// batches itself, errors worded for tandem.Feed (connect_timeout, "this feed").
// tandem.plan() finds its dataset with them.
FeedOptions feeder_feed_options(FeedOptions base, const FeederOptions& f);

class Feeder {
 public:
  // Checks the options, then starts a thread that finds the dataset (RankFeed: this
  // host's copy of --data, or learnt from the workers), starts the feed (RankFeed::start)
  // and keeps the next batches ready. Does not wait: wait_started() does, and throws what
  // that thread met. Throws ConfigError for options that cannot work (no source, a
  // negative local_threads, start_step past steps or given with epoch).
  // `feed`: the settings' feed options (launch/feed_settings.h); `steps`: --steps.
  Feeder(FeederOptions opts, FeedOptions feed, uint64_t steps);
  ~Feeder();  // close()
  Feeder(const Feeder&) = delete;
  Feeder& operator=(const Feeder&) = delete;

  // Waits up to `seconds` until the feed serves: a worker answered with our dataset, or
  // local threads make batches (absent workers join later). True once it does. Throws
  // what finding the dataset or connecting threw: NetworkError when no worker answered
  // within --connect-timeout or one refused us (token, job), ConfigError for settings
  // that cannot work (a bad rank, a dataset smaller than a global batch, no data here
  // for local threads) or a worker serving another dataset.
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

  // Whether the feed has started (wait_started() returned true once).
  bool started() const;
  // REQUIRES (these five): started().
  const RankFeed& rank_feed() const { return *feed_; }
  const data::DatasetInfo& info() const { return feed_->info(); }
  const data::Sampler& sampler() const { return feed_->sampler(); }
  uint64_t steps() const { return steps_; }             // the step after the last one delivered
  uint64_t start_step() const { return start_step_; }   // the first step delivered
  // REQUIRES: wait_started() returned true.
  std::vector<SourceStats> stats() const;
  uint64_t hedged() const;

 private:
  void pump();     // the feed's thread: find the dataset, connect, then move batches from the scheduler
  void start_feed();  // pump's first part: makes and starts feed_
  void resume_at(RankFeed& feed) const;  // anchors feed at opts_.resume

  FeederOptions opts_;
  FeedOptions feed_options_;
  SecurityOptions security_;  // for shutdown_workers() when there is no feed_
  uint64_t steps_ = 0;        // written by pump() before started_
  uint64_t start_step_ = 0;   // likewise
  std::atomic<bool> stop_{false};
  std::unique_ptr<RankFeed> feed_;  // made by pump(), set under mu_

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
