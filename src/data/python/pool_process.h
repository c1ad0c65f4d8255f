// Internal to the Python pool (process_pool.cc, pool_process.cc): one Python process of
// the pool, its socket, pidfd and shared memory; and how one is reaped.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "pool_channel.h"
#include "tandem/common/clock.h"
#include "tandem/data/python/process_pool.h"

namespace tandem::data {

// The most shared memory one process may map (PythonPoolOptions::max_shm_bytes 0).
inline constexpr size_t kMaxShmBytes = size_t{4} << 30;

// One Python process: its pid, its end of the socketpair and its shared memory.
struct PythonProcessPool::Process {
  pool::Channel channel;  // its pid, socket and pidfd
  pid_t& pid = channel.pid;
  int shm = -1;
  std::byte* map = nullptr;
  size_t mapped = 0;
  bool busy = false;  // GUARDED_BY(pool mu_)

  ~Process() { stop(1.0); }

  void start(const PythonPoolOptions& opts);
  void stop(double grace_s);
  void close_all();
  void remap(size_t size);
  void grow(size_t size);
  SampleFields fields_of(const nlohmann::json& reply);
  // Where it is in "many" requests (pool::kProgressBytes): the steps it made in all, and
  // the samples of the one it is in.
  std::pair<uint64_t, uint64_t> progress() const;
};

// Waits for `pid` to end (SIGKILL at `deadline`), ends what it left in its process group
// (children a dataset forked) while its id is still the group's, and reaps it: "killed
// by signal 9 (Killed)" / "exited with status 3".
std::string reap(pid_t pid, Clock::time_point deadline);

}  // namespace tandem::data
