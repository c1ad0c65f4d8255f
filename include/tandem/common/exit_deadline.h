// The last resort against a wait that never ends. A read of a hung network file system
// (NFS, a FUSE mount) sleeps in the kernel: its thread can be neither woken nor joined,
// and the destructor that joins it would hold a stopping process for good, deaf to
// SIGTERM (the hostile run's trainer and worker took SIGKILL only). Once armed, the
// process ends with `code` at the deadline unless it ended first, saying what did not
// end. For the executables only: a library in someone else's process leaves it alone.
#pragma once

#include <string>

namespace tandem {

// How long a process may take to end once its work is done or failed: record, release,
// join its threads. Far beyond a healthy ending (a second or two).
inline constexpr double kEndingS = 20;

// Ends the process `seconds` from now (std::_Exit, after the log is flushed), naming
// `what` was ending. Arming again keeps the earliest deadline, with the first arming's
// code and words. Thread-safe.
void exit_by(double seconds, int code, const std::string& what);

// Arms exit_by when it goes out of scope, however it does (a return, an exception):
// declared after the objects whose destructors may wait for good (a feed whose reading
// threads are stuck), it bounds their destruction. The code is `code` unless ending()
// named the one the scope returns.
class ExitIfStuck {
 public:
  ExitIfStuck(double seconds, int code, std::string what);
  ~ExitIfStuck();
  ExitIfStuck(const ExitIfStuck&) = delete;
  ExitIfStuck& operator=(const ExitIfStuck&) = delete;

  // The code the scope ends with, returned: `return stuck.ending(code);`.
  int ending(int code) {
    code_ = code;
    return code;
  }

 private:
  const double seconds_;
  int code_;
  const std::string what_;
};

}  // namespace tandem
