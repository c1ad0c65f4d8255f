#include "tandem/feed/scheduler.h"

#include <algorithm>

#include "tandem/common/error.h"

namespace tandem::feed {

Scheduler::Scheduler(RequestFactory make_request, SchedulerOptions opts)
    : make_request_(std::move(make_request)), opts_(opts) {
  opts_.prefetch = std::max(opts_.prefetch, 1);
  next_new_ = next_deliver_ = opts_.first_batch;
}

int Scheduler::add_source(std::string name, int window) {
  std::lock_guard lock(mu_);
  Source s;
  s.stats.name = std::move(name);
  s.window = std::max(window, 1);
  sources_.push_back(std::move(s));
  return static_cast<int>(sources_.size()) - 1;
}

bool Scheduler::has_work_for(const Source& s) const {
  if (s.inflight >= s.window) return false;
  if (!retry_.empty()) return true;
  return next_new_ < opts_.total_batches && next_new_ < next_deliver_ + opts_.prefetch;
}

std::optional<data::BatchRequest> Scheduler::acquire(int source) {
  std::unique_lock lock(mu_);
  Source& s = sources_.at(source);
  cv_.wait(lock, [&] {
    return closed_ || s.stats.failed || s.retired || next_deliver_ >= opts_.total_batches || has_work_for(s);
  });
  if (closed_ || s.stats.failed || s.retired || next_deliver_ >= opts_.total_batches) return std::nullopt;
  uint64_t seq;
  if (!retry_.empty()) {
    seq = retry_.front();
    retry_.pop_front();
  } else {
    seq = next_new_++;
  }
  outstanding_[seq] = source;
  ++s.inflight;
  lock.unlock();
  return make_request_(seq);
}

void Scheduler::complete(int source, data::Batch batch) {
  {
    std::lock_guard lock(mu_);
    auto it = outstanding_.find(batch.sequence);
    if (it == outstanding_.end() || it->second != source) return;
    outstanding_.erase(it);
    Source& s = sources_.at(source);
    --s.inflight;
    batch.source = source;
    ready_.emplace(batch.sequence, std::move(batch));
  }
  cv_.notify_all();
}

void Scheduler::fail(int source, const std::string& why, bool may_return) {
  {
    std::lock_guard lock(mu_);
    Source& s = sources_.at(source);
    if (s.stats.failed) {  // a later, better explanation of the same failure
      s.stats.error = why;
      return;
    }
    s.may_return = may_return;
    s.stats.failed = true;
    s.stats.error = why;
    s.inflight = 0;
    // Re-issue in sequence order so the oldest (most urgent) request goes out first.
    std::vector<uint64_t> lost;
    for (auto it = outstanding_.begin(); it != outstanding_.end();) {
      if (it->second == source) {
        lost.push_back(it->first);
        it = outstanding_.erase(it);
      } else {
        ++it;
      }
    }
    retry_.insert(retry_.begin(), lost.begin(), lost.end());
    std::sort(retry_.begin(), retry_.end());
  }
  cv_.notify_all();
}

void Scheduler::revive(int source) {
  {
    std::lock_guard lock(mu_);
    Source& s = sources_.at(source);
    if (!s.stats.failed || !s.may_return) return;
    s.stats.failed = false;
    s.may_return = false;
    s.retired = false;
    s.inflight = 0;
    ++s.stats.rejoins;
  }
  cv_.notify_all();
}

void Scheduler::abandon(int source, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    Source& s = sources_.at(source);
    s.may_return = false;
    s.stats.failed = true;
    s.stats.error = why;
  }
  cv_.notify_all();
}

void Scheduler::retire(int source) {
  {
    std::lock_guard lock(mu_);
    sources_.at(source).retired = true;
  }
  cv_.notify_all();
}

bool Scheduler::all_failed() const {
  return std::all_of(sources_.begin(), sources_.end(),
                     [](const Source& s) { return s.stats.failed && !s.may_return; });
}

std::string Scheduler::failure_summary() const {
  std::string out;
  for (const Source& s : sources_) {
    out += "\n  " + s.stats.name + ": " +
           (s.stats.failed ? (s.may_return ? "down, being retried: " : "") + s.stats.error : "alive, no batch");
  }
  return out;
}

std::optional<data::Batch> Scheduler::next() {
  std::unique_lock lock(mu_);
  if (next_deliver_ >= opts_.total_batches) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(opts_.batch_timeout_s));
  const bool arrived = cv_.wait_until(lock, deadline, [&] {
    return closed_ || ready_.count(next_deliver_) || sources_.empty() || all_failed();
  });
  waited_ += std::chrono::steady_clock::now() - start;
  auto it = ready_.find(next_deliver_);
  if (it == ready_.end()) {
    if (closed_) return std::nullopt;
    const std::string seq = std::to_string(next_deliver_);
    if (!arrived) {
      throw NetworkError("no batch " + seq + " within --batch-timeout " +
                         std::to_string(opts_.batch_timeout_s) + " s; sources:" + failure_summary());
    }
    throw NetworkError("every data source failed before batch " + seq + ":" + failure_summary());
  }
  data::Batch batch = std::move(it->second);
  ready_.erase(it);
  ++next_deliver_;
  Source& s = sources_.at(batch.source);
  ++s.stats.batches;
  s.stats.samples += static_cast<uint64_t>(batch.size());
  s.stats.compute_seconds += batch.compute_seconds;
  lock.unlock();
  cv_.notify_all();
  return batch;
}

void Scheduler::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

std::vector<SourceStats> Scheduler::stats() const {
  std::lock_guard lock(mu_);
  std::vector<SourceStats> out;
  for (const Source& s : sources_) out.push_back(s.stats);
  return out;
}

double Scheduler::wait_seconds() const {
  std::lock_guard lock(mu_);
  return std::chrono::duration<double>(waited_).count();
}

}  // namespace tandem::feed
