#include "tandem/data/sources/bad_samples.h"

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::data {

BadSamplePolicy parse_bad_sample_policy(const std::string& name) {
  if (name == "fail") return BadSamplePolicy::kFail;
  if (name == "skip") return BadSamplePolicy::kSkip;
  throw ConfigError("unknown --on-bad-sample '" + printable(name, 40) + "': use 'fail' (stop at the first bad file) or 'skip' " +
                    "(use the next good sample instead, and list the bad file)");
}

void SkipLog::record(const std::string& path, const std::string& problem) {
  count_.fetch_add(1);
  list(path, path, problem);
}

void SkipLog::note(const std::string& path, const std::string& problem) { list(path + ": " + problem, path, problem); }

void SkipLog::list(const std::string& key, const std::string& path, const std::string& problem) {
  std::lock_guard lock(mu_);
  if (!keys_.insert(key).second) return;
  entries_.push_back(path + ": " + problem);
  spdlog::warn("skipping {}: {} (--on-bad-sample skip)", path, problem);
}

std::vector<std::string> SkipLog::entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

}  // namespace tandem::data
