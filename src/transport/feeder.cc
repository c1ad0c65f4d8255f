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
#include "tandem/feed/local_source.h"
#include "tandem/transport/credentials.h"
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
  scheduler_ = std::make_unique<feed::Scheduler>(
      [s = sampler_.get()](uint64_t seq) { return s->request(seq); },
      feed::SchedulerOptions{steps_, t.prefetch, t.batch_timeout_s, opts_.start_step});
  if (settings_.security.token.empty() &&
      std::any_of(opts_.workers.begin(), opts_.workers.end(), [](const auto& w) { return !is_loopback(w); })) {
    spdlog::warn("THE DATA PLANE IS OPEN: no token is set, so anyone on the network can feed this process batches "
                 "or stop its workers. Set TANDEM_TOKEN (or token_file=) here and on every worker (docs/security.md)");
  }
  keep_grpc_initialised();
  pump_ = std::thread([this] { pump(); });
}

Feeder::~Feeder() { close(); }

void Feeder::connect() {
  const TrainerOptions& t = settings_.trainer;
  std::vector<bool> ready(opts_.workers.size(), false);
  for (const std::string& target : opts_.workers) {
    workers_.push_back(std::make_unique<RemoteWorker>(target, settings_.security));
  }
  const bool local = opts_.local_threads > 0;
  const auto deadline = Clock::now() + seconds(t.connect_timeout_s);
  for (;;) {
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (ready[i]) continue;
      try {
        workers_[i]->wait_ready(1.0, &stop_);
      } catch (const NetworkError&) {
        continue;
      }
      workers_[i]->check_serves(info(), std::min(kCallDeadlineS * 3, t.connect_timeout_s));
      ready[i] = true;
    }
    if (std::all_of(ready.begin(), ready.end(), [](bool r) { return r; })) break;
    if (local || std::any_of(ready.begin(), ready.end(), [](bool r) { return r; })) break;
    if (stop_) throw Interrupted("stopped while connecting to the data workers");
    if (Clock::now() > deadline) {
      throw NetworkError("no data worker answered within connect_timeout " +
                         std::to_string(static_cast<int>(t.connect_timeout_s)) + " s (" +
                         std::to_string(workers_.size()) + " tried, e.g. " + workers_.front()->target() +
                         "): check that they run and listen on that address, or raise connect_timeout");
    }
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!ready[i]) spdlog::warn("data worker {} does not answer yet: the feed starts without it, it joins when it does",
                                workers_[i]->target());
    workers_[i]->start(*scheduler_, scheduler_->add_source(workers_[i]->target(), t.inflight), &info(), !ready[i]);
  }
  if (local) {
    local_ = std::make_unique<feed::LocalSource>(*scheduler_, dataset_, opts_.local_threads,
                                                 data::wire_dtype(settings_.data));
  }
}

void Feeder::pump() {
  try {
    connect();
    {
      std::lock_guard lock(mu_);
      started_ = true;
    }
    cv_.notify_all();
    while (std::optional<data::Batch> batch = scheduler_->next()) {
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
  scheduler_->close();
  if (pump_.joinable()) pump_.join();
  // The sources' threads use the scheduler: they go before it does.
  for (auto& w : workers_) w->stop();
  local_.reset();
}

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
