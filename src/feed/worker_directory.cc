#include "tandem/feed/worker_directory.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::feed {
namespace {

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

constexpr size_t kMostLineChars = 300;           // a host name is 253 at most, with a port
constexpr uintmax_t kMostWatchBytes = 4 << 20;   // 10,000 workers' lines, and room

// A watch file's line as an address, or "" for a blank line or a comment.
std::string address_of(std::string line, const std::string& path, int number, int default_port) {
  if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
  line = trimmed(line);
  if (line.empty()) return "";
  const std::string where = "--workers-watch " + printable(path, 200) + " line " + std::to_string(number) + ": ";
  if (line.size() > kMostLineChars) {
    throw ConfigError(where + "a line of " + std::to_string(line.size()) + " characters is not an address. Fix: "
                      "write one host:port a line (# starts a comment)");
  }
  const std::string target = line.find_first_of(" \t,/") == std::string::npos
                                 ? cluster::with_default_port(line, default_port) : "";
  if (!cluster::is_worker_address(target)) {
    throw ConfigError(where + "\"" + printable(line, 80) + "\" is not one address. Fix: write one host:port a "
                      "line, e.g. cpu-1:6000 or [fd00::1]:6000 (# starts a comment)");
  }
  return target;
}

// What tells a file's versions apart without reading it: its inode (a file renamed into
// place), size, and modification and change times.
std::string stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec);
}

void add_unique(std::vector<std::string>& out, const std::string& target) {
  if (std::find(out.begin(), out.end(), target) == out.end()) out.push_back(target);
}

}  // namespace

DirectoryOptions directory_options(const std::vector<std::string>& workers, const std::string& service,
                                   const std::string& watch_file, const ClusterOptions& cluster) {
  DirectoryOptions o;
  for (const std::string& w : workers) {
    if (!w.starts_with("dns:")) o.fixed.push_back(cluster::worker_target(w, cluster.worker_port, "--workers"));
  }
  o.names = cluster::worker_services(workers, service, cluster);
  o.watch_file = watch_file;
  return o;
}

std::vector<std::string> read_watch_file(const std::string& path, int default_port) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw ConfigError("--workers-watch " + printable(path, 200) + " is not a regular file (a directory, a device, a "
                      "FIFO): point it at a file of host:port lines");
  }
  if (const uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMostWatchBytes) {
    throw ConfigError("--workers-watch " + printable(path, 200) + " is " + std::to_string(size) + " bytes, more "
                      "than a list of workers: point it at a file of host:port lines");
  }
  std::ifstream in(path);
  if (!in) {
    throw ConfigError("--workers-watch " + path + " cannot be read: create it (one host:port a line) before "
                      "the run starts, or check its path and permissions");
  }
  std::vector<std::string> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const std::string a = address_of(line, path, number, default_port); !a.empty()) add_unique(out, a);
  }
  return out;
}

WorkerDirectory::WorkerDirectory(DirectoryOptions opts, int default_port)
    : opts_(std::move(opts)), default_port_(default_port) {
  if (!opts_.resolve) opts_.resolve = cluster::resolve_all;
  if (!opts_.watch_file.empty()) {
    file_stamp_ = stamp_of(opts_.watch_file);
    from_file_ = read_watch_file(opts_.watch_file, default_port_);
  }
  resolve_names(Clock::now());
}

void WorkerDirectory::reread_file() {
  const std::string stamp = stamp_of(opts_.watch_file);
  if (stamp == file_stamp_ && file_problem_.empty() && !empty_pending_) return;
  try {
    std::vector<std::string> listed = read_watch_file(opts_.watch_file, default_port_);
    // A file rewritten in place may be read between its truncation and its writing: an
    // empty list retires the whole pool only when the next poll reads it again.
    if (listed.empty() && !from_file_.empty() && !empty_pending_) {
      empty_pending_ = true;
      file_stamp_ = stamp;
      return;
    }
    empty_pending_ = false;
    from_file_ = std::move(listed);
    file_stamp_ = stamp;
    file_problem_.clear();
  } catch (const ConfigError& e) {
    if (file_problem_ != e.what()) spdlog::warn("{}; keeping its last list until it is fixed", e.what());
    file_problem_ = e.what();
    file_stamp_ = stamp;
  }
}

void WorkerDirectory::resolve_names(Clock::time_point now) {
  if (opts_.names.empty() || (resolved_at_ != Clock::time_point{} && now - resolved_at_ < seconds(opts_.resolve_every_s))) {
    return;
  }
  resolved_at_ = now;
  for (const cluster::WorkerService& s : opts_.names) {
    std::vector<std::string> targets;
    try {
      for (const std::string& address : opts_.resolve(s.name, opts_.resolve_timeout_s)) {
        add_unique(targets, cluster::Endpoint{s.name, address, s.port}.target());
      }
    } catch (const Error& e) {
      spdlog::warn("data workers' name {} did not resolve ({}); keeping its last {} addresses", s.name, e.what(),
                   from_names_[s.name].size());
      continue;
    }
    if (!targets.empty()) from_names_[s.name] = std::move(targets);
  }
}

std::vector<std::string> WorkerDirectory::current(Clock::time_point now) {
  if (!opts_.watch_file.empty()) reread_file();
  resolve_names(now);
  std::vector<std::string> out;
  for (const std::string& t : opts_.fixed) add_unique(out, t);
  for (const std::string& t : from_file_) add_unique(out, t);
  for (const cluster::WorkerService& s : opts_.names) {
    for (const std::string& t : from_names_[s.name]) add_unique(out, t);
  }
  return out;
}

}  // namespace tandem::feed
