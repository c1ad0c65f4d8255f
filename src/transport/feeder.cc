#include "tandem/transport/feeder.h"

#include <algorithm>
#include <chrono>
#include <future>

#include <spdlog/spdlog.h>

#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/roles.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/batching/convert.h"
#include "tandem/transport/feed_sources.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/transport/remote_worker.h"

namespace tandem::transport {
namespace {

using Clock = std::chrono::steady_clock;

// Batches the pump keeps ready beyond the scheduler's --prefetch: one to hand over while
// the next is moved, so the consumer never waits on the pump itself.
constexpr size_t kAhead = 2;

// The deadline of a worker's identity check and of a Shutdown call: a healthy worker
// answers in milliseconds.
constexpr double kCallDeadlineS = 3;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(s, 0.0)));
}

}  // namespace

Feeder::Feeder(const Settings& settings, FeederOptions opts) : settings_(settings), opts_(std::move(opts)) {
  const TrainerOptions& t = settings_.trainer;
  if (opts_.world < 1 || opts_.rank < 0 || opts_.rank >= opts_.world) {
    throw ConfigError("rank " + std::to_string(opts_.rank) + " of world " + std::to_string(opts_.world) +
                      " is impossible: use 0 <= rank < world (torchrun sets RANK and WORLD_SIZE)");
  }
  if (opts_.local_threads < 0) {
    throw ConfigError("local_threads must be 0 or more, got " + std::to_string(opts_.local_threads));
  }
  for (auto& w : opts_.workers) w = cluster::with_default_port(w, settings_.cluster.worker_port);
  if (opts_.workers.empty() && opts_.local_threads == 0) {
    throw ConfigError("no data source: no workers were given and local_threads is 0; "
                      "pass workers=[\"host:port\", ...] or local_threads=N");
  }
  steps_ = static_cast<uint64_t>(t.steps);
  if (opts_.start_step > steps_) {
    throw ConfigError("start_step " + std::to_string(opts_.start_step) + " is past steps " + std::to_string(steps_) +
                      ": resume at a step before the last");
  }
  dataset_ = data::make_dataset(settings_.data);
  sampler_ = std::make_unique<data::Sampler>(dataset_->info().size, t.batch_size, settings_.data.seed, opts_.rank,
                                             opts_.world);
  sources_ = std::make_unique<FeedSources>(
      *sampler_, feed::SchedulerOptions{steps_, t.prefetch, t.batch_timeout_s, opts_.start_step});
  keep_grpc_initialised();
  pump_ = std::thread([this] { pump(); });
}

Feeder::~Feeder() { close(); }

void Feeder::pump() {
  try {
    // Connects as `tandem trainer` does, then starts every source.
    const TrainerOptions& t = settings_.trainer;
    sources_->connect_workers(opts_.workers, settings_.security, info(),
                              {.timeout_s = t.connect_timeout_s, .inflight = t.inflight,
                               .local = opts_.local_threads > 0, .check_deadline_s = kCallDeadlineS * 3,
                               .timeout_setting = "connect_timeout"},
                              stop_);
    if (opts_.local_threads > 0) {
      sources_->start_local(dataset_, opts_.local_threads, data::wire_dtype(settings_.data));
    }
    {
      std::lock_guard lock(mu_);
      started_ = true;
    }
    cv_.notify_all();
    while (std::optional<data::Batch> batch = sources_->scheduler().next()) {
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
  sources_->scheduler().close();  // ends a pump waiting for a batch
  if (pump_.joinable()) pump_.join();
  sources_->close();
}

std::vector<feed::SourceStats> Feeder::stats() const { return sources_->scheduler().stats(); }

uint64_t Feeder::hedged() const { return sources_->scheduler().hedged(); }

int Feeder::shutdown_workers(const std::string& reason) const {
  std::vector<std::future<bool>> calls;
  for (const std::string& target : opts_.workers) {
    calls.push_back(std::async(std::launch::async, [&, target] {
      return RemoteWorker(target, settings_.security).shutdown(reason, kCallDeadlineS);
    }));
  }
  int acknowledged = 0;
  for (auto& c : calls) acknowledged += c.get() ? 1 : 0;
  return acknowledged;
}

}  // namespace tandem::transport
