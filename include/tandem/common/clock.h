// One clock for every deadline and measurement, and the one conversion from a setting in
// seconds (a double, as flags and settings files give it) to that clock's durations.
#pragma once

#include <algorithm>
#include <chrono>

namespace tandem {

using Clock = std::chrono::steady_clock;

// `seconds` as a Clock duration; negative values are zero, and more than 1e9 s (an
// "infinite" timeout) is 1e9 s, so that it cannot overflow the clock's representation.
inline Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::clamp(s, 0.0, 1e9)));
}

// The time point `s` seconds from now.
inline Clock::time_point after(double s) { return Clock::now() + seconds(s); }

// Seconds between two time points, as a double.
inline double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Seconds from `t` until now.
inline double seconds_since(Clock::time_point t) { return seconds_between(t, Clock::now()); }

}  // namespace tandem
