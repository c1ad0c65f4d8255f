#include "tandem/transport/pool_jobs.h"

#include <chrono>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"

namespace tandem::transport {
namespace {

constexpr const char* kForm =
    R"j(write it as {"jobs": [{"name": "lr-0.1", "token": "<openssl rand -hex 32>", "weight": 1}, ...]})j";

PoolJob parse_job(const nlohmann::json& j, size_t i, const std::string& origin) {
  const std::string where = origin + ": jobs[" + std::to_string(i) + "]";
  if (!j.is_object()) throw ConfigError(where + " is not an object: " + kForm);
  for (const auto& [key, value] : j.items()) {
    if (key != "name" && key != "token" && key != "weight" && key != "settings") {
      throw ConfigError(where + " has an unknown key '" + printable(key, 40) + "' (name, token, weight, settings): " +
                        kForm);
    }
  }
  PoolJob job;
  for (const char* key : {"name", "token"}) {
    if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty()) {
      throw ConfigError(where + " has no " + key + " (a non-empty string): " + kForm);
    }
  }
  job.name = j["name"].get<std::string>();
  job.token = j["token"].get<std::string>();
  if (j.contains("weight")) {
    if (!j["weight"].is_number() || !(j["weight"].get<double>() > 0) || j["weight"].get<double>() > 1e6) {
      throw ConfigError(where + " ('" + printable(job.name, 80) + "') has weight " + printable(j["weight"].dump(), 40) +
                        ": a weight is a positive number, its share of the cores against the other jobs'");
    }
    job.weight = j["weight"].get<double>();
  }
  if (j.contains("settings")) {
    if (!j["settings"].is_object()) {
      throw ConfigError(where + " ('" + printable(job.name, 80) + "') has settings that are not an object: give its "
                        "data settings over the pool's, as a settings file names them, e.g. {\"pipeline\": \"...\"}");
    }
    if (!j["settings"].empty()) job.settings = j["settings"].dump();
  }
  return job;
}

}  // namespace

std::vector<PoolJob> parse_pool_jobs(const std::string& text, const std::string& origin) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("jobs") || !j["jobs"].is_array()) {
    throw ConfigError(origin + " is not a pool's jobs file: " + kForm);
  }
  std::vector<PoolJob> jobs;
  std::set<std::string> names, tokens;
  for (size_t i = 0; i < j["jobs"].size(); ++i) {
    PoolJob job = parse_job(j["jobs"][i], i, origin);
    if (!names.insert(job.name).second) {
      throw ConfigError(origin + ": job '" + printable(job.name, 80) + "' is listed twice: give each job one entry");
    }
    if (!tokens.insert(job.token).second) {
      throw ConfigError(origin + ": job '" + printable(job.name, 80) + "' has another job's token: every job "
                        "needs its own (a token names its job)");
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

PoolJobs::PoolJobs(std::string path) : path_(std::move(path)) {
  const std::optional<std::string> text = read_file(path_);
  if (!text) throw ConfigError("cannot read --pool-jobs " + path_ + ": check the path and its permissions");
  jobs_ = parse_pool_jobs(*text, "--pool-jobs " + path_);
  std::error_code ec;
  seen_ = std::filesystem::last_write_time(path_, ec);
  seen_size_ = std::filesystem::file_size(path_, ec);
}

void PoolJobs::reload_if_changed() {
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (now - checked_ns_ < std::chrono::nanoseconds(std::chrono::seconds(1)).count()) return;
  checked_ns_ = now;
  std::error_code ec, ec2;
  const auto mtime = std::filesystem::last_write_time(path_, ec);
  const uint64_t size = std::filesystem::file_size(path_, ec2);
  if (!ec && !ec2 && mtime == seen_ && size == seen_size_) return;
  seen_ = mtime;
  seen_size_ = size;
  try {
    const std::optional<std::string> text = read_file(path_);
    if (!text) throw ConfigError("cannot read --pool-jobs " + path_);
    std::vector<PoolJob> jobs = parse_pool_jobs(*text, "--pool-jobs " + path_);
    spdlog::info("the pool's jobs file {} changed: {} job(s) admitted now", path_, jobs.size());
    jobs_ = std::move(jobs);
  } catch (const std::exception& e) {
    spdlog::warn("{}; the pool keeps admitting the {} job(s) it had until the file is right", e.what(), jobs_.size());
  }
}

std::optional<PoolJob> PoolJobs::find(const std::string& authorization) {
  std::lock_guard lock(mu_);
  reload_if_changed();
  std::optional<PoolJob> found;
  for (const PoolJob& job : jobs_) {
    if (secrets_equal(authorization, "Bearer " + job.token)) found = job;  // every one compared: constant time
  }
  return found;
}

std::vector<PoolJob> PoolJobs::jobs() const {
  std::lock_guard lock(mu_);
  return jobs_;
}

size_t PoolJobs::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

}  // namespace tandem::transport
