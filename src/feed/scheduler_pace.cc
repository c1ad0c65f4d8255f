// The pace of a Scheduler (scheduler.h): which never-issued sequence a source takes now,
// by the consumer's pace and the source's latency, within the prefetch window, and how far
// that window and each source's request depth reach when sources read ahead from slow
// storage (request_depth.h).
#include <algorithm>
#include <cmath>

#include "tandem/feed/scheduler.h"

namespace tandem::feed {

namespace {
// A source counts as in time for a batch when 1.25 x its latency fits before it is due.
constexpr double kLatencyMargin = 1.25;
}  // namespace

bool Scheduler::in_time(double latency, uint64_t seq, double interval) const {
  return kLatencyMargin * latency <= static_cast<double>(seq - next_deliver_ + 1) * interval;
}

std::optional<double> Scheduler::consumer_interval() const {
  if (consumer_work_.size() < 4) return std::nullopt;
  std::vector<double> sorted(consumer_work_.begin(), consumer_work_.end());
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2), sorted.end());
  return sorted[sorted.size() / 2];
}

std::optional<uint64_t> Scheduler::new_sequence_for(int id) const {
  const uint64_t end = opts_.total_batches;
  const std::optional<uint64_t> in_line =
      next_new_ < end && next_new_ < next_deliver_ + prefetch_now() ? std::optional(next_new_) : std::nullopt;
  const std::optional<double> interval = consumer_interval();
  const Source& s = sources_.at(id);
  if (!interval || *interval <= 0 || !s.latency || in_time(*s.latency, next_new_, *interval)) return in_line;
  bool other = false;  // a live source that makes next_new_ in time takes the line's batches
  for (size_t i = 0; i < sources_.size() && !other; ++i) {
    const Source& o = sources_[i];
    other = static_cast<int>(i) != id && !o.stats.failed && !o.retired && o.latency &&
            in_time(*o.latency, next_new_, *interval);
  }
  if (!other) return in_line;
  uint64_t seq = std::max(next_new_, next_deliver_ + static_cast<uint64_t>(std::ceil(kLatencyMargin * *s.latency /
                                                                                     *interval)));
  while (seq < end && taken(seq)) ++seq;
  return seq < end ? std::optional(seq) : std::nullopt;
}


uint64_t Scheduler::prefetch_now() const {
  return static_cast<uint64_t>(std::min(opts_.max_prefetch, opts_.prefetch + beyond_));
}

void Scheduler::follow_reads(Source& s, const data::Batch& batch) {
  const int before = s.depth.depth();
  s.window = s.depth.update(batch.reads_wanted, s.inflight, batch.size());
  beyond_ += s.window - before;  // a source that fails keeps its share: max_prefetch bounds it
}

}  // namespace tandem::feed
