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

// A worker's --max-inflight-mb and who may hold what of it, decided once: its dataset's
// Python processes map at most half (shared among them) for their samples, files read
// ahead take at most a quarter, and batches in flight have the rest (batch_bytes()).
struct InflightSplit {
  uint64_t total = 0;       // --max-inflight-mb, else default_inflight_bytes()
  uint64_t python_shm = 0;  // DataRole::python_shm_bytes
  uint64_t read_ahead = 0;  // DataRole::read_ahead_bytes
  // What batches in flight may hold when the dataset holds `held` of the rest (its
  // processes' shared memory and its read-ahead, as it reports them): total - held, or
  // half of the total when they hold it all.
  uint64_t batch_bytes(uint64_t held) const { return held < total ? total - held : total / 2; }
};
InflightSplit split_inflight(int64_t max_inflight_mb);

}  // namespace tandem::transport
