// What both ends of the job channel (release_gate.h) share: the clock, the deadlines of
// one call and of a held watch, and how a wait looks at a stop.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <grpcpp/grpcpp.h>

namespace tandem::launch::channel {

using Clock = std::chrono::steady_clock;
inline constexpr double kSliceS = 0.1;  // how often a wait looks at `stop`
inline constexpr double kCallS = 1.0;   // one Join or Report call's deadline
inline constexpr double kHoldS = 3.0;   // a watch call is answered after this long at the latest

inline Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

inline double left_until(Clock::time_point t) { return std::chrono::duration<double>(t - Clock::now()).count(); }

// Answers that retrying cannot change: the caller is not of this job or run.
bool is_refusal(grpc::StatusCode code);

// Sleeps `seconds` in slices, returning early (false) when `stop` says so.
bool pause(double seconds, const std::function<bool()>& stop);

}  // namespace tandem::launch::channel
