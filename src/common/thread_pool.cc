#include "tandem/common/thread_pool.h"

#include "tandem/common/crash_report.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem {

ThreadPool::ThreadPool(int threads) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] {
      crash_report_this_thread();
      run();
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return in ? ss.str() : std::string();
}

// ceil(quota / period) for a positive quota; 0 for none or garbage.
int cores_of(double quota, double period) {
  if (!(quota > 0) || !(period > 0)) return 0;
  return std::max(1, static_cast<int>(std::ceil(quota / period - 1e-9)));
}

// The smallest limit of `dir` and its ancestors up to `root`, read by `limit_in`.
int smallest_up_to(const std::filesystem::path& root, std::filesystem::path dir,
                   const std::function<int(const std::filesystem::path&)>& limit_in) {
  int best = 0;
  for (;;) {
    const int here = limit_in(dir);
    if (here > 0 && (best == 0 || here < best)) best = here;
    if (dir == root || !dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
    if (dir.string().size() < root.string().size()) break;
  }
  return best;
}

}  // namespace

int cgroup_cpu_limit(const std::string& root, const std::string& proc_self_cgroup) {
  namespace fs = std::filesystem;
  std::istringstream lines(proc_self_cgroup);
  int limit = 0;
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy-id:controllers:path"
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    const std::string rel = path.substr(std::min(path.find_first_not_of('/'), path.size()));  // "" for "/"
    int here = 0;
    if (controllers.empty()) {  // cgroup v2
      here = smallest_up_to(fs::path(root), fs::path(root) / rel, [](const fs::path& dir) {
        std::istringstream in(read_text(dir / "cpu.max"));
        std::string quota;
        double period = 0;
        if (!(in >> quota >> period) || quota == "max") return 0;
        return cores_of(std::atof(quota.c_str()), period);
      });
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {  // cgroup v1
      for (const std::string& mount : {controllers, std::string("cpu"), std::string("cpu,cpuacct")}) {
        const fs::path base = fs::path(root) / mount;
        if (!fs::is_directory(base)) continue;
        here = smallest_up_to(base, base / rel, [](const fs::path& dir) {
          return cores_of(std::atof(read_text(dir / "cpu.cfs_quota_us").c_str()),
                          std::atof(read_text(dir / "cpu.cfs_period_us").c_str()));
        });
        break;
      }
    }
    if (here > 0 && (limit == 0 || here < limit)) limit = here;
  }
  return limit;
}

int available_cores() {
  int n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(n, 1);
  static const int quota = cgroup_cpu_limit("/sys/fs/cgroup", read_text("/proc/self/cgroup"));
  return quota > 0 ? std::min(n, quota) : n;
}

}  // namespace tandem
