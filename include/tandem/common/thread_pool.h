// A fixed pool of threads sized to the cores it may use, so preprocessing never
// oversubscribes the host.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  // REQUIRES: threads >= 1.
  explicit ThreadPool(int threads);
  // Runs what was already submitted, then joins.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task` to run on one of the pool's threads, in submission order; returns at
  // once. The task must not throw (catch inside it and hand the error back, as
  // BatchMaker's chunks do): an exception escaping it ends the process.
  void submit(std::function<void()> task);
  // The number of threads.
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                    // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;
};

// Cores this process may use: its affinity mask, capped by its cgroup's CPU quota (a
// Kubernetes or Docker CPU limit), at least 1.
int available_cores();

// The CPU quota of the cgroup a process is in, in whole cores (rounded up), or 0 when it
// has none. `proc_self_cgroup` is the text of /proc/self/cgroup; `root` is where cgroupfs
// is mounted (/sys/fs/cgroup). cgroup v2 reads cpu.max ("max 100000" or "150000 100000")
// of the process's cgroup and its ancestors (the smallest wins); v1 reads
// cpu.cfs_quota_us / cpu.cfs_period_us (-1: none) of the cpu controller's hierarchy.
int cgroup_cpu_limit(const std::string& root, const std::string& proc_self_cgroup);

}  // namespace tandem
