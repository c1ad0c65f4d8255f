#include "tandem/report/output_lock.h"

#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;

double epoch_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Seconds since `path` was last touched; negative when it is not there.
double age_of(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  const double mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
  return std::max(0.0, epoch_seconds() - mtime);
}

bool runs_here(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

std::string describe(const LockHolder& h) {
  return fmt::format("host {}, pid {}, job '{}'", printable(h.host, 80), h.pid, printable(h.job, 80));
}

// Creates `path` with `text` unless it exists: link() of a finished file, so that a
// reader never sees half of it and two runs cannot both succeed.
bool create_exclusively(const std::string& path, const std::string& text) {
  const std::string staged = path + "." + std::to_string(getpid()) + ".new";
  write_file_atomically(staged, text);
  const bool made = link(staged.c_str(), path.c_str()) == 0;
  const int err = errno;
  std::error_code ignored;
  fs::remove(staged, ignored);
  if (!made && err != EEXIST) throw Error(fmt::format("cannot create {}: {}", path, std::strerror(err)));
  return made;
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

// The parent of process `pid` (0 when it is not known).
static int parent_of(int pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  int parent = 0;
  rest >> state >> parent;
  return parent;
}

bool held_by_another_run(const std::string& root, const std::string& host, int group_pid) {
  const std::string path = root + "/.tandem-lock";
  const double age = age_of(path);
  if (root.empty() || age < 0) return false;
  const LockHolder holder = parse_lock(read_text(path));
  const bool here = holder.host == host;
  if (!why_stale(holder, age, host, here && runs_here(holder.pid)).empty()) return false;
  return !(here && (holder.pid == group_pid || parent_of(holder.pid) == group_pid));
}

std::string lock_text(const LockHolder& h) {
  return nlohmann::json{{"host", h.host}, {"pid", h.pid}, {"job", h.job}, {"started", h.started}}.dump() + "\n";
}

LockHolder parse_lock(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  LockHolder h;
  if (!j.is_object()) return h;
  if (j.contains("host") && j["host"].is_string()) h.host = j["host"];
  if (j.contains("pid") && j["pid"].is_number_integer()) h.pid = j["pid"];
  if (j.contains("job") && j["job"].is_string()) h.job = j["job"];
  if (j.contains("started") && j["started"].is_number()) h.started = j["started"];
  return h;
}

std::string why_stale(const LockHolder& h, double age_s, const std::string& this_host, bool pid_alive) {
  if (h.host.empty() || h.pid <= 0) return "it is not a tandem lock one can read";
  if (h.host == this_host && !pid_alive) return fmt::format("pid {} no longer runs on this host", h.pid);
  if (age_s >= kLockStaleS) return fmt::format("it was last touched {:.0f} s ago (its holder touches it every {:g} s)",
                                               age_s, kLockTouchS);
  return "";
}

OutputLock::OutputLock(const std::string& root, const LockHolder& given, double wait_s) {
  if (root.empty()) return;
  LockHolder me = given;
  me.pid = getpid();
  if (me.host.empty()) me.host = this_host();
  if (me.started == 0) me.started = epoch_seconds();
  path_ = root + "/.tandem-lock";
  mine_ = lock_text(me);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  bool waiting_said = false;
  while (!create_exclusively(path_, mine_)) {
    const std::string text = read_text(path_);
    const LockHolder holder = parse_lock(text);
    const double age = age_of(path_);
    if (age < 0) continue;  // removed meanwhile: try again
    const std::string stale = why_stale(holder, age, me.host, holder.host == me.host && runs_here(holder.pid));
    if (!stale.empty()) {
      spdlog::warn("taking over the lock of output folder {} from an earlier run ({}): {}", root, describe(holder),
                   stale);
      // Replace it only if it is still the stale one: another starter may have taken it.
      std::error_code ec;
      if (read_text(path_) == text && !fs::remove(path_, ec) && ec) {
        throw ConfigError(fmt::format("cannot remove the stale lock {}: {}: remove it by hand", path_, ec.message()));
      }
      continue;
    }
    const bool elsewhere = holder.host != me.host;
    if (!elsewhere || std::chrono::steady_clock::now() >= give_up) {
      throw ConfigError(fmt::format(
          "output folder {} is in use by another run ({}, started {:.0f} s ago): two runs in one folder would "
          "resume each other's checkpoints and overwrite each other's model and summary. Give this job another "
          "name (--job-name, sbatch --job-name) or another --sagemaker-root; or stop that run first",
          root, describe(holder), std::max(0.0, epoch_seconds() - holder.started)));
    }
    if (!waiting_said) {
      spdlog::info("output folder {} is locked by {}: waiting up to {:g} s for it to end or go stale", root,
                   describe(holder), wait_s);
      waiting_said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  spdlog::debug("holding {}", path_);
  toucher_ = std::thread([this] {
    while (!done_) {
      for (int i = 0; i < static_cast<int>(kLockTouchS * 10) && !done_; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!done_) utimensat(AT_FDCWD, path_.c_str(), nullptr, 0);
    }
  });
}

OutputLock::~OutputLock() {
  if (path_.empty()) return;
  done_ = true;
  if (toucher_.joinable()) toucher_.join();
  try {
    if (read_text(path_) == mine_) fs::remove(path_);
  } catch (const std::exception& e) {
    spdlog::warn("could not remove the lock {}: {}", path_, e.what());
  }
}

}  // namespace tandem::report
