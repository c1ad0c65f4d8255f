#include "tandem/transport/byte_budget.h"

#include <chrono>
#include <fstream>
#include <string>

namespace tandem::transport {

bool ByteBudget::acquire(uint64_t bytes, const std::function<bool()>& give_up) {
  std::unique_lock lock(mu_);
  while (used_ + bytes > capacity_) {
    if (give_up()) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
  used_ += bytes;
  return true;
}

void ByteBudget::release(uint64_t bytes) {
  {
    std::lock_guard lock(mu_);
    used_ -= std::min(bytes, used_);
  }
  cv_.notify_all();
}

uint64_t ByteBudget::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

uint64_t default_inflight_bytes() {
  constexpr uint64_t kFloor = uint64_t{256} << 20;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return std::max(kFloor, kib * 1024 / 4);
  }
  return kFloor;
}

InflightSplit split_inflight(int64_t max_inflight_mb) {
  InflightSplit s;
  s.total = max_inflight_mb > 0 ? static_cast<uint64_t>(max_inflight_mb) << 20 : default_inflight_bytes();
  s.python_shm = s.total / 2;
  s.read_ahead = s.total / 4;
  return s;
}

}  // namespace tandem::transport
