// Internal to process supervision: SIGINT and SIGTERM as bytes on a pipe (the self-pipe
// trick), so that a signal wakes poll() like any other event.
#pragma once

#include <signal.h>

#include <vector>

namespace tandem::launch {

// Catches SIGINT/SIGTERM for its lifetime and restores the previous handlers after.
// One per process at a time (supervise() is not reentrant): a second throws.
class SignalCatcher {
 public:
  SignalCatcher();
  ~SignalCatcher();
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

  int fd() const { return fds_[0]; }  // readable when a signal arrived

  // The signals received since the last call.
  std::vector<int> take();

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace tandem::launch
