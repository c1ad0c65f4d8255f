// What a file dataset does with a sample it cannot make (--on-bad-sample), and the record
// of what it skipped, so a run's summary can list every substituted file.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace tandem::data {

enum class BadSamplePolicy { kFail, kSkip };

// "fail" | "skip". Throws ConfigError naming the choices.
BadSamplePolicy parse_bad_sample_policy(const std::string& name);

// Thread-safe list of distinct skipped items ("path: problem") and a count of substitutions.
class SkipLog {
 public:
  // Counts one substitution of `path`; lists it the first time. Logs a warning then.
  void record(const std::string& path, const std::string& problem);
  // Lists `path: problem` without counting a substitution (an empty class folder, each
  // problem an index found: one shard may have several).
  void note(const std::string& path, const std::string& problem);
  std::vector<std::string> entries() const;
  uint64_t count() const { return count_.load(); }

 private:
  // Lists `entry` unless `key` was listed before.
  void list(const std::string& key, const std::string& path, const std::string& problem);

  mutable std::mutex mu_;
  std::set<std::string> keys_;        // GUARDED_BY(mu_): paths recorded, entries noted
  std::vector<std::string> entries_;  // GUARDED_BY(mu_)
  std::atomic<uint64_t> count_{0};
};

// Substitutes tried after a bad sample before giving up: the next indices, in order.
inline constexpr uint64_t kMaxSubstituteTries = 1000;

}  // namespace tandem::data
