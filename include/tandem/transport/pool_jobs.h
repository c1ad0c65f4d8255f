// The jobs a pool of data workers admits (`tandem worker --pool-jobs FILE`): each with its
// own token, issued and revoked by whoever runs the pool by editing FILE, which the
// worker re-reads when it changes. A job's token admits that job alone: it may stream
// and release its own streams, never stop the pool or touch another job's. See
// docs/security.md ("A pool for several jobs").
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tandem::transport {

struct PoolJob {
  std::string name;
  std::string token;
  double weight = 1;  // its share of the pool's cores against the other jobs that want them
  // Its data settings over the pool's own, as a JSON object ({"pipeline": "...", "image-size":
  // 64}) in canonical form: jobs with another pipeline on the same pool; "" = the pool's.
  std::string settings;
};

// The jobs of FILE's text: {"jobs": [{"name": "lr-0.1", "token": "...", "weight": 2,
// "settings": {"pipeline": "...", ...}}, ...]} (weight optional, > 0; settings optional,
// an object of data settings). Throws ConfigError naming `origin`, the entry and the fix for
// anything else: no jobs list, a name or token missing or empty, a name or token used
// twice, a weight that is not a positive number, an unknown key.
std::vector<PoolJob> parse_pool_jobs(const std::string& text, const std::string& origin);

class PoolJobs {
 public:
  // Reads `path` (ConfigError for a file that is missing or wrong).
  explicit PoolJobs(std::string path);

  // The job whose token the caller's `authorization` value ("Bearer TOKEN") carries,
  // compared in constant time, after re-reading the file if it changed (at most once a
  // second); nullopt for a token of no job (never issued, or revoked). A file that has
  // become unreadable or wrong keeps the jobs it had, and says so once per change.
  std::optional<PoolJob> find(const std::string& authorization);

  size_t size() const;
  // Every job as read last.
  std::vector<PoolJob> jobs() const;

 private:
  void reload_if_changed();  // REQUIRES: mu_ held

  const std::string path_;
  mutable std::mutex mu_;
  std::vector<PoolJob> jobs_;                      // GUARDED_BY(mu_)
  std::filesystem::file_time_type seen_{};         // GUARDED_BY(mu_): the file's mtime when read
  uint64_t seen_size_ = 0;                         // GUARDED_BY(mu_)
  int64_t checked_ns_ = 0;                         // GUARDED_BY(mu_): steady clock of the last check
};

}  // namespace tandem::transport
