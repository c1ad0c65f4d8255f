// A shared allowance of bytes (the batches a worker has accepted but not yet sent),
// so that memory stays bounded however many streams ask at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace tandem::transport {

class ByteBudget {
 public:
  explicit ByteBudget(uint64_t capacity) : capacity_(capacity) {}

  // Takes `bytes` once they fit, waiting while others hold the allowance. Returns false
  // without taking anything if `give_up()` becomes true first (polled every 200 ms).
  // REQUIRES: bytes <= capacity().
  bool acquire(uint64_t bytes, const std::function<bool()>& give_up);
  // Gives back `bytes` taken by acquire() and wakes the waiters they now fit.
  // REQUIRES: these bytes were acquired and not yet released.
  void release(uint64_t bytes);

  // The whole allowance, and the part held now.
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;

 private:
  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t used_ = 0;  // GUARDED_BY(mu_)
};

// A quarter of the memory /proc/meminfo reports available, at least 256 MiB.
uint64_t default_inflight_bytes();

}  // namespace tandem::transport
