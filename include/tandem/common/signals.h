// SIGINT/SIGTERM handling for long-running roles. The signals are blocked and taken
// on a dedicated thread with sigtimedwait, so the handler may do real work (log,
// set flags, notify) instead of being limited to async-signal-safe calls.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace tandem {

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

}  // namespace tandem
