#include "tandem/common/exit_deadline.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "tandem/common/clock.h"

namespace tandem {
namespace {

std::mutex mu;
Clock::time_point deadline = Clock::time_point::max();  // GUARDED_BY(mu)

void wait_and_exit(int code, std::string what, double seconds) {
  std::unique_lock lock(mu);
  while (Clock::now() < deadline) {
    const Clock::time_point until = deadline;
    lock.unlock();
    std::this_thread::sleep_until(until);
    lock.lock();
  }
  spdlog::error("{} did not end within {:g} s (a thread waits on something that never returns: a read of a hung "
                "network file system?); exiting {} without waiting for it",
                what, seconds, code);
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace

void exit_by(double seconds, int code, const std::string& what) {
  const Clock::time_point at = Clock::now() + tandem::seconds(seconds);
  std::lock_guard lock(mu);
  if (at >= deadline) return;  // an earlier one stands
  const bool first = deadline == Clock::time_point::max();
  deadline = at;
  if (first) std::thread(wait_and_exit, code, what, seconds).detach();
}

ExitIfStuck::ExitIfStuck(double seconds, int code, std::string what)
    : seconds_(seconds), code_(code), what_(std::move(what)) {}

ExitIfStuck::~ExitIfStuck() { exit_by(seconds_, code_, what_); }

}  // namespace tandem
