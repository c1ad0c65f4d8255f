#include "tandem/feed/scheduler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"

namespace tandem::feed {
namespace {

}  // namespace

Scheduler::Scheduler(RequestFactory make_request, SchedulerOptions opts)
    : make_request_(std::move(make_request)), opts_(opts) {
  opts_.prefetch = std::max(opts_.prefetch, 1);
  opts_.max_prefetch = std::max(opts_.max_prefetch, opts_.prefetch);
  next_new_ = next_deliver_ = opts_.first_batch;
}

int Scheduler::add_source(std::string name, int window) {
  std::lock_guard lock(mu_);
  Source s;
  s.stats.name = std::move(name);
  s.depth = RequestDepth(window, std::max(window, opts_.max_prefetch));
  s.window = s.depth.depth();
  sources_.push_back(std::move(s));
  return static_cast<int>(sources_.size()) - 1;
}

long Scheduler::retry_index_for(int id) const {
  for (size_t i = 0; i < retry_.size(); ++i) {
    const auto it = outstanding_.find(retry_[i]);
    if (it == outstanding_.end() || (it->second.owner != id && it->second.hedge != id)) return static_cast<long>(i);
  }
  return -1;
}

bool Scheduler::has_work_for(int id) const {
  const Source& s = sources_.at(id);
  if (s.inflight >= s.window) return false;
  if (!s.checks.empty() || retry_index_for(id) >= 0) return true;
  return new_sequence_for(id).has_value();
}

std::optional<data::BatchRequest> Scheduler::acquire(int source) {
  std::unique_lock lock(mu_);
  Source& s = sources_.at(source);
  cv_.wait(lock, [&] {
    return closed_ || s.stats.failed || s.retired || next_deliver_ >= opts_.total_batches || has_work_for(source);
  });
  if (closed_ || s.stats.failed || s.retired || next_deliver_ >= opts_.total_batches) return std::nullopt;
  uint64_t seq;
  const auto now = Clock::now();
  if (!s.checks.empty()) {  // a batch made before, to compare (its copy is in losers_)
    seq = s.checks.front();
    s.checks.pop_front();
  } else if (const long i = retry_index_for(source); i >= 0) {
    seq = retry_[static_cast<size_t>(i)];
    retry_.erase(retry_.begin() + i);
    auto it = outstanding_.find(seq);
    if (it != outstanding_.end()) {  // a hedge: the owner still works on it
      it->second.hedge = source;
      it->second.hedge_since = now;
    } else {
      outstanding_[seq] = Ticket{source, now, -1, {}};
    }
  } else {
    seq = *new_sequence_for(source);  // has_work_for() said there is one
    if (seq != next_new_) ++s.stats.ahead;
    outstanding_[seq] = Ticket{source, now, -1, {}};
    while (next_new_ < opts_.total_batches && taken(next_new_)) ++next_new_;
  }
  ++s.inflight;
  lock.unlock();
  return make_request_(seq);
}

void Scheduler::complete(int source, data::Batch batch) {
  {
    std::lock_guard lock(mu_);
    Source& s = sources_.at(source);
    if (auto l = losers_.find({batch.sequence, source}); l != losers_.end()) {  // the other holder answered first
      compare_copies(batch, source, l->second);
      losers_.erase(l);
      --s.inflight;
      cv_.notify_all();
      return;
    }
    auto it = outstanding_.find(batch.sequence);
    if (it == outstanding_.end()) return;
    Ticket& t = it->second;
    if (t.owner != source && t.hedge != source) return;
    const bool by_owner = t.owner == source;
    const auto since = by_owner ? t.since : t.hedge_since;
    const double latency = seconds_since(since);
    latencies_.push_back(latency);
    if (latencies_.size() > 64) latencies_.pop_front();
    s.latency = s.latency ? 0.75 * *s.latency + 0.25 * latency : latency;
    const int other = by_owner ? t.hedge : t.owner;
    latest_ = Made{batch.sequence, {data::digest_of(batch), batch.dtype, source}};
    if (other >= 0) losers_[{batch.sequence, other}] = latest_->copy;
    outstanding_.erase(it);
    follow_reads(s, batch);
    --s.inflight;
    batch.source = source;
    ready_.emplace(batch.sequence, std::move(batch));
  }
  cv_.notify_all();
}

void Scheduler::fail(int source, const std::string& why, bool may_return, bool bad_data) {
  {
    std::lock_guard lock(mu_);
    fail_locked(source, why, may_return, bad_data);
  }
  cv_.notify_all();
}

void Scheduler::fail_locked(int source, const std::string& why, bool may_return, bool bad_data) {
  {
    Source& s = sources_.at(source);
    s.bad_data = s.bad_data || bad_data;  // a later failure does not undo the first's kind
    if (s.stats.failed) {  // a later, better explanation of the same failure
      s.stats.error = why;
      return;
    }
    s.may_return = may_return && !s.leaving;  // one that left is not taken back
    s.stats.failed = true;
    s.stats.error = why;
    s.inflight = 0;
    s.checks.clear();
    for (auto it = losers_.begin(); it != losers_.end();) it = it->first.second == source ? losers_.erase(it) : std::next(it);
    // Re-issue in sequence order so the oldest (most urgent) request goes out first; a
    // request another source also holds (a hedge) stays with that one.
    std::vector<uint64_t> lost;
    for (auto it = outstanding_.begin(); it != outstanding_.end();) {
      Ticket& t = it->second;
      if (t.hedge == source) t.hedge = -1;
      if (t.owner == source) {
        if (t.hedge >= 0) {
          t.owner = t.hedge;
          t.since = t.hedge_since;
          t.hedge = -1;
        } else {
          lost.push_back(it->first);
          it = outstanding_.erase(it);
          continue;
        }
      }
      ++it;
    }
    // A queued hedge for a request that is now lost is a plain retry already.
    for (const uint64_t seq : lost) retry_.erase(std::remove(retry_.begin(), retry_.end(), seq), retry_.end());
    retry_.insert(retry_.begin(), lost.begin(), lost.end());
    std::sort(retry_.begin(), retry_.end());
  }
}

void Scheduler::revive(int source, bool rejoined) {
  {
    std::lock_guard lock(mu_);
    Source& s = sources_.at(source);
    if (!s.stats.failed || !s.may_return) return;
    s.stats.failed = false;
    s.bad_data = false;
    s.may_return = false;
    s.retired = false;
    s.inflight = 0;
    if (rejoined) ++s.stats.rejoins;
    if (latest_ && !losers_.count({latest_->sequence, source})) {
      s.checks.push_back(latest_->sequence);
      losers_[{latest_->sequence, source}] = latest_->copy;
    }
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

void Scheduler::leave(int source, const std::string& why, bool answers) {
  {
    std::lock_guard lock(mu_);
    Source& s = sources_.at(source);
    s.retired = s.leaving = true;
    s.answers = answers;
    s.may_return = false;
    s.stats.left = why;
  }
  cv_.notify_all();
}

void Scheduler::rejoin(int source, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    Source& s = sources_.at(source);
    s.leaving = s.answers = false;
    s.stats.left.clear();
    if (s.stats.failed) s.may_return = true;
    fail_locked(source, why, /*may_return=*/true, /*bad_data=*/false);  // one being retried, at once
  }
  cv_.notify_all();
}

// Every source failed for good or left with nothing outstanding: nobody will answer
// (unless sources may still join).
bool Scheduler::all_failed() const {
  if (opts_.sources_may_join) return false;
  for (size_t i = 0; i < sources_.size(); ++i) {
    const Source& s = sources_[i];
    if (s.stats.failed && !s.may_return) continue;
    if (s.leaving && s.inflight <= 0) continue;
    return false;
  }
  return true;
}

std::string Scheduler::failure_summary() const {
  std::string out;
  for (const Source& s : sources_) {
    out += "\n  " + s.stats.name + ": " +
           (s.stats.failed ? (s.may_return ? "down, being retried: " : "") + s.stats.error
                           : !s.stats.left.empty() ? "left: " + s.stats.left : "alive, no batch");
  }
  return out;
}

void Scheduler::compare_copies(const data::Batch& copy, int source, const Copy& first) {
  if (copy.dtype != first.dtype || data::digest_of(copy) == first.digest) return;  // another dtype: not comparable
  const int winner = first.source;
  std::string samples;
  for (size_t i = 0; i < copy.indices.size() && i < 8; ++i) samples += (i ? ", " : "") + std::to_string(copy.indices[i]);
  const std::string what = "batch " + std::to_string(copy.sequence) + " (samples " + samples +
                           (copy.indices.size() > 8 ? ", ..." : "") + ") came from " +
                           (winner == source ? sources_.at(source).stats.name + " before and after it rejoined"
                                             : sources_.at(winner).stats.name + " and " + sources_.at(source).stats.name) +
                           " with different bytes: the dataset is not deterministic (users' code drawing from a "
                           "source tandem does not seed: os.urandom, the time, a process id, global state), so "
                           "resuming and re-sent requests cannot be exact (docs/datasets.md, 'Seeding')";
  if (unrepeatable_.size() < 16) unrepeatable_.push_back(what);
  if (unrepeatable_.size() == 1) spdlog::warn("{}", what);
  if (opts_.require_deterministic && unrepeatable_error_.empty()) unrepeatable_error_ = what + " (--require-deterministic)";
}

std::vector<std::string> Scheduler::determinism_problems() const {
  std::lock_guard lock(mu_);
  return unrepeatable_;
}

std::optional<data::Batch> Scheduler::next() {
  std::unique_lock lock(mu_);
  if (!unrepeatable_error_.empty()) throw DataError(unrepeatable_error_);
  if (next_deliver_ >= opts_.total_batches) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  if (returned_) {  // the consumer's own work since the last batch
    consumer_work_.push_back(seconds_between(*returned_, start));
    if (consumer_work_.size() > 32) consumer_work_.pop_front();
  }
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(opts_.batch_timeout_s));
  auto done = [&] { return closed_ || ready_.count(next_deliver_) || sources_.empty() || all_failed(); };
  bool arrived = done();
  // Wait in slices: the batch at the head of the line may be late enough to hedge.
  while (!arrived && Clock::now() < deadline) {
    arrived = cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)), done);
    if (!arrived) maybe_hedge(Clock::now());
  }
  waited_ += std::chrono::steady_clock::now() - start;
  auto it = ready_.find(next_deliver_);
  if (it == ready_.end()) {
    if (closed_) return std::nullopt;
    const std::string seq = std::to_string(next_deliver_);
    if (!arrived) {
      throw NetworkError(fmt::format("no batch {} within --batch-timeout {} s; sources:{}", seq, opts_.batch_timeout_s,
                                     failure_summary()));
    }
    const std::string what = "every data source failed before batch " + seq + ":" + failure_summary();
    auto bad = [](const Source& s) { return s.bad_data; };
    auto bad_or_left = [](const Source& s) { return s.bad_data || !s.stats.left.empty(); };
    // Failed on the data itself everywhere: bad data (exit 4), not a peer (exit 5).
    if (std::any_of(sources_.begin(), sources_.end(), bad) && std::all_of(sources_.begin(), sources_.end(), bad_or_left)) throw DataError(what);
    throw NetworkError(what);
  }
  data::Batch batch = std::move(it->second);
  ready_.erase(it);
  ++next_deliver_;
  returned_ = Clock::now();
  Source& s = sources_.at(batch.source);
  ++s.stats.batches;
  s.stats.samples += static_cast<uint64_t>(batch.size());
  s.stats.compute_seconds += batch.compute_seconds;
  s.stats.bytes += batch.payload_bytes();
  lock.unlock();
  cv_.notify_all();
  return batch;
}

std::optional<Clock::duration> Scheduler::hedge_margin() const {
  if (latencies_.size() < 8) return std::nullopt;
  std::vector<double> sorted(latencies_.begin(), latencies_.end());
  const size_t k = sorted.size() * 9 / 10;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(k), sorted.end());
  const double margin = std::max(2.0 * sorted[k], 0.25);
  return seconds(margin);
}

// The request the loop waits for is late: let another live source make it too, so one
// slow or stalled host cannot stall every step. The first answer wins.
void Scheduler::maybe_hedge(Clock::time_point now) {
  const auto it = outstanding_.find(next_deliver_);
  if (it == outstanding_.end() || it->second.hedge >= 0) return;
  if (std::find(retry_.begin(), retry_.end(), next_deliver_) != retry_.end()) return;
  const std::optional<Clock::duration> margin = hedge_margin();
  if (!margin || now - it->second.since < *margin) return;
  const int owner = it->second.owner;
  if (sources_.at(owner).answers && !sources_.at(owner).stats.failed) return;  // it said it answers
  bool other = false;
  for (size_t i = 0; i < sources_.size(); ++i) {
    other |= static_cast<int>(i) != owner && !sources_[i].stats.failed && !sources_[i].retired;
  }
  if (!other) return;
  retry_.push_front(next_deliver_);
  ++hedged_;
  ++sources_.at(owner).stats.hedged;
  cv_.notify_all();
}

uint64_t Scheduler::hedged() const {
  std::lock_guard lock(mu_);
  return hedged_;
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
  for (const Source& s : sources_) {
    out.push_back(s.stats);
    out.back().depth = s.depth.depth();
    out.back().deepest = s.depth.deepest();
  }
  return out;
}

double Scheduler::wait_seconds() const {
  std::lock_guard lock(mu_);
  return std::chrono::duration<double>(waited_).count();
}

}  // namespace tandem::feed
