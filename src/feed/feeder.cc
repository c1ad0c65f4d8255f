#include "tandem/feed/feeder.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/cluster/endpoint.h"
#include "tandem/common/clock.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/sample_audit.h"

namespace tandem::feed {
namespace {

// Batches the pump keeps ready beyond the scheduler's --prefetch: one to hand over while
// the next is moved, so the consumer never waits on the pump itself.
constexpr size_t kAhead = 2;

}  // namespace

FeedOptions feeder_feed_options(FeedOptions o, const FeederOptions& f) {
  // The feeder's own workers first, then those of the settings' directory not among them.
  std::vector<std::string> workers;
  for (const std::string& w : f.workers) workers.push_back(cluster::worker_target(w, o.worker_port, "workers="));
  for (std::string& w : o.workers) {
    if (std::find(workers.begin(), workers.end(), w) == workers.end()) workers.push_back(std::move(w));
  }
  o.workers = std::move(workers);
  o.rank = f.rank;
  o.world = f.world;
  // With local threads the Python module makes samples from its own copy of --data; with
  // workers only, a dataset not here is learnt from them, and a Python dataset always is
  // (it needs neither the dataset's FILE nor its processes).
  o.may_learn = f.local_threads == 0;
  o.learn_python = f.local_threads == 0;
  o.learn_any = f.local_threads == 0 && !f.data_given && !o.workers.empty();  // the directory's too
  o.check_deadline_s = 3 * kReleaseDeadlineS;
  o.timeout_setting = "connect_timeout";
  o.consumer = "this feed";
  if (!f.relay.empty()) o.relay = f.relay;
  return o;
}

Feeder::Feeder(FeederOptions opts, FeedOptions feed, uint64_t steps)
    : opts_(std::move(opts)), security_(feed.security) {
  if (opts_.local_threads < 0) {
    throw ConfigError("local_threads must be 0 or more, got " + std::to_string(opts_.local_threads));
  }
  for (auto& w : opts_.workers) w = cluster::worker_target(w, feed.worker_port, "workers=");
  if (opts_.workers.empty() && opts_.local_threads == 0) {
    throw ConfigError("no data source: no workers were given and local_threads is 0; "
                      "pass workers=[\"host:port\", ...] or local_threads=N");
  }
  steps_ = steps;
  start_step_ = opts_.start_step;
  if (opts_.epoch && opts_.start_step > 0 && !opts_.resume) {
    throw ConfigError("start_step and epoch are both given: an epoch's feed starts at its first step; give one");
  }
  if (!opts_.epoch && opts_.start_step > steps_) {
    throw ConfigError("start_step " + std::to_string(opts_.start_step) + " is past steps " + std::to_string(steps_) +
                      ": resume at a step before the last");
  }
  if (opts_.local_threads > 0 && !data::dataset_is_here(feed.data)) {
    throw ConfigError("local_threads=" + std::to_string(opts_.local_threads) + " make batches from this host's copy of "
                      "--data " + printable(feed.data.data) + ", which is not here: give this host the data, or "
                      "local_threads=0 to learn the dataset from the workers, which then make every batch");
  }
  feed_options_ = feeder_feed_options(std::move(feed), opts_);
  pump_ = std::thread([this] { pump(); });
}

Feeder::~Feeder() { close(); }

void Feeder::start_feed() {
  // Made here, not in the constructor: learning the dataset from the workers waits for
  // them, and close() must be able to end that wait (stop_).
  auto feed = std::make_unique<RankFeed>(feed_options_, stop_);
  if (opts_.resume) resume_at(*feed);
  if (opts_.epoch) {
    const auto epoch = static_cast<uint32_t>(*opts_.epoch);
    if (opts_.resume && epoch < opts_.resume->epoch) {
      throw ConfigError(fmt::format("epoch {} is before the state's, which was saved in epoch {}: iterate from "
                                    "epoch {} on (set_epoch)", epoch, opts_.resume->epoch, opts_.resume->epoch));
    }
    start_step_ = feed->sampler().epoch_start(epoch);
    steps_ = feed->sampler().epoch_start(epoch + 1);
  }
  {
    std::lock_guard lock(mu_);
    feed_ = std::move(feed);
  }
  feed_->start(steps_, start_step_, opts_.local_threads);
}

// A saved state's place (opts_.resume) becomes the sampler's anchor at start_step; a
// state of another geometry is said once, by rank 0, as the trainer says its own.
void Feeder::resume_at(RankFeed& feed) const {
  const data::DataPosition& then = *opts_.resume;
  if (then.dataset_size != feed.info().size) {
    throw ConfigError(fmt::format("the state was saved over a dataset of {} samples, and this feed's {} has {}: "
                                  "resume with the data it was saved with", then.dataset_size, feed.info().name,
                                  feed.info().size));
  }
  const std::string shift = resume_shift(then, feed.sampler().position(opts_.start_step));
  if (opts_.rank == 0 && !shift.empty()) spdlog::warn("this feed resumes a state of another world size or batch size: {}", shift);
  feed.anchor(data::anchor_at(opts_.start_step, then));
}

void Feeder::pump() {
  try {
    start_feed();
    {
      std::lock_guard lock(mu_);
      started_ = true;
    }
    cv_.notify_all();
    while (std::optional<data::Batch> batch = feed_->next()) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return ready_.size() < kAhead || stop_; });
      if (stop_) break;
      ready_.push_back(std::move(*batch));
      lock.unlock();
      cv_.notify_all();
    }
  } catch (const Interrupted&) {
    // close() during connect: not a failure.
  } catch (...) {
    std::lock_guard lock(mu_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard lock(mu_);
    ended_ = true;
  }
  cv_.notify_all();
}

bool Feeder::wait_started(double s) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, seconds(s), [&] { return started_ || ended_; });
  if (error_) std::rethrow_exception(error_);
  return started_ || ended_;
}

Feeder::Status Feeder::next(double s, std::optional<data::Batch>& out) {
  out.reset();
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, seconds(s), [&] { return !ready_.empty() || ended_; });
  if (!ready_.empty()) {
    out.emplace(std::move(ready_.front()));
    ready_.pop_front();
    lock.unlock();
    cv_.notify_all();
    return Status::kBatch;
  }
  if (error_) std::rethrow_exception(error_);
  return ended_ ? Status::kEnd : Status::kPending;
}

void Feeder::close() {
  std::lock_guard closing(close_mu_);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  {
    std::lock_guard lock(mu_);
    if (feed_) feed_->interrupt();  // ends a pump waiting to connect or for a batch
  }
  if (pump_.joinable()) pump_.join();
  if (feed_) feed_->close();
}

bool Feeder::started() const {
  std::lock_guard lock(mu_);
  return started_;
}

std::vector<SourceStats> Feeder::stats() const {
  std::lock_guard lock(mu_);
  return started_ ? feed_->scheduler().stats() : std::vector<SourceStats>{};
}

uint64_t Feeder::hedged() const {
  std::lock_guard lock(mu_);
  return started_ ? feed_->scheduler().hedged() : 0;
}

int Feeder::shutdown_workers(const std::string& reason) const {
  const RankFeed* feed = nullptr;
  {
    std::lock_guard lock(mu_);
    feed = feed_.get();  // once set, it stays until the Feeder goes
  }
  return feed ? feed->release_workers(reason) : release_workers(opts_.workers, security_, reason);
}

}  // namespace tandem::feed
