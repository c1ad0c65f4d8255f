#include "tandem/common/cpu_time.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace tandem {
namespace {

thread_local double helper_seconds = 0;

}  // namespace

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void add_helper_cpu_seconds(double seconds) {
  if (seconds > 0) helper_seconds += seconds;
}

double work_cpu_seconds() { return thread_cpu_seconds() + helper_seconds; }

double process_age_seconds() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  double up = 0;
  if (!std::getline(stat, line) || !(uptime >> up)) return 0;
  // Field 22 (starttime, clock ticks after boot) counts from after the command's ")".
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i != 22) continue;
    const double ticks = std::stod(field), hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    return hz > 0 ? std::max(up - ticks / hz, 0.0) : 0;
  }
  return 0;
}

void pad_step(Clock::time_point started, double ms) {
  if (ms > 0) std::this_thread::sleep_until(started + seconds(ms / 1000));
}

void emulate_slower(double cpu_seconds, double slowdown) {
  if (slowdown > 1 && cpu_seconds > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>((slowdown - 1) * cpu_seconds));
  }
}

}  // namespace tandem
