// SIGINT/SIGTERM handling for long-running roles. The signals are blocked and taken
// on a dedicated thread with sigtimedwait, so the handler may do real work (log,
// set flags, notify) instead of being limited to async-signal-safe calls.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace tandem {

// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread it starts
// later. Call before anything that may start threads (LibTorch's and CUDA's do) when a
// SignalWatcher will take the signals: a thread that does not block them would receive
// the signal and the default action would kill the process.
void block_stop_signals();
// Unblocks them in the calling thread only (for a sigaction-based handler there).
void unblock_stop_signals();
// Whether SIGINT or SIGTERM is pending while blocked (block_stop_signals) and nothing has
// taken it yet: a wait before a SignalWatcher exists looks at it to end early. Does not
// take the signal.
bool stop_signal_pending();

class SignalWatcher {
 public:
  // REQUIRES: called before the process starts other threads, which inherit the mask.
  explicit SignalWatcher(std::function<void(int signo)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// "SIGTERM", "SIGKILL", ...; "signal 42" for one without a common name.
std::string signal_name(int sig);

}  // namespace tandem
