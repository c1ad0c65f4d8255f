#include "tandem/data/io/read_depth.h"

#include <algorithm>
#include <cmath>

namespace tandem::data {
namespace {

// Each new read weighs this much in the smoothed latency and size (about the last 20).
constexpr double kReadWeight = 0.05;
// Each ended window weighs this much in the rate: a rate that doubles is followed within
// a few windows.
constexpr double kWindowWeight = 0.5;

}  // namespace

void ReadDepth::took(Clock::time_point now, bool waited) {
  ++window_takes_;
  window_waits_ += waited ? 1 : 0;
  const double elapsed = seconds_between(window_start_, now);
  if (elapsed < kWindowSeconds) return;
  const double r = static_cast<double>(window_takes_) / elapsed;
  starved_ = window_waits_ * 10 > window_takes_;
  // Starved, the rate is what the reads allowed: the last window's, at once, so that the
  // depth doubles each round trip rather than creeping up behind an average.
  rate_ = rate_known_ && !starved_ ? (1 - kWindowWeight) * rate_ + kWindowWeight * r : r;
  rate_known_ = true;
  window_start_ = now;
  window_takes_ = window_waits_ = 0;
}

void ReadDepth::read(double seconds, uint64_t bytes) {
  const double w = reads_ == 0 ? 1.0 : std::max(kReadWeight, 1.0 / static_cast<double>(reads_ + 1));
  latency_ += w * (std::max(0.0, seconds) - latency_);
  mean_bytes_ += w * (static_cast<double>(bytes) - mean_bytes_);
  ++reads_;
}

double ReadDepth::rate(Clock::time_point now) const {
  if (rate_known_) return rate_;
  const double elapsed = seconds_between(window_start_, now);
  return elapsed > 0 ? static_cast<double>(window_takes_) / elapsed : 0;
}

uint64_t ReadDepth::wanted(Clock::time_point now, uint64_t max_bytes) const {
  if (reads_ == 0) return 0;
  const double want = std::ceil((starved_ ? kStarvedHeadroom : kHeadroom) * rate(now) * latency_);
  const double room = mean_bytes_ >= 1 ? std::floor(static_cast<double>(max_bytes) / mean_bytes_) : want;
  return static_cast<uint64_t>(std::max(0.0, std::min(want, room)));
}

}  // namespace tandem::data
