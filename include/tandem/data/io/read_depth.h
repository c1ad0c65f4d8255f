// How far ahead of its takers a read-ahead should read: the samples they take while one
// read is in flight (Little's law: rate x latency), with headroom for the spread of
// both, within the bytes it may hold. Measured as it runs: the rate of samples taken and
// the latency and size of the reads that ended. Free of threads and clocks of its own, so
// that a test drives it with made-up times.
#pragma once

#include <cstdint>

#include "tandem/common/clock.h"

namespace tandem::data {

class ReadDepth {
 public:
  // Rate x latency x kHeadroom: reads vary in latency, takers in pace.
  static constexpr double kHeadroom = 1.5;
  // While takers wait on reads, the rate they take at is what the reads allow, not what
  // they could take: twice that is asked for, so that the depth doubles each round trip
  // until they no longer wait.
  static constexpr double kStarvedHeadroom = 2;
  // The rate is the smoothed mean of windows this long.
  static constexpr double kWindowSeconds = 0.1;

  explicit ReadDepth(Clock::time_point start) : window_start_(start) {}

  // A sample was taken (whether its bytes were read ahead or not); `waited`: its read was
  // not done when it was taken.
  void took(Clock::time_point now, bool waited = false);
  // A read ended after `seconds` (from its start, waits of the storage included) with
  // `bytes` bytes.
  void read(double seconds, uint64_t bytes);

  // Samples the takers should have ahead of them: ceil(kHeadroom x rate x latency) (with
  // kStarvedHeadroom when over a tenth of the takes of the last window waited), at most
  // what `max_bytes` holds at the mean size of a read; 0 before any read ended.
  uint64_t wanted(Clock::time_point now, uint64_t max_bytes) const;

  // Samples taken per second: the smoothed rate of the windows that ended, or of the one
  // in progress before any ended.
  double rate(Clock::time_point now) const;
  double latency() const { return latency_; }         // seconds, smoothed
  double mean_bytes() const { return mean_bytes_; }  // of a read, smoothed

 private:
  Clock::time_point window_start_;
  uint64_t window_takes_ = 0;
  uint64_t window_waits_ = 0;
  bool starved_ = false;  // the last window's takes waited
  double rate_ = 0;
  bool rate_known_ = false;
  double latency_ = 0;
  double mean_bytes_ = 0;
  uint64_t reads_ = 0;
};

}  // namespace tandem::data
