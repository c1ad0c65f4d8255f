#include "tandem/report/run_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tandem/common/error.h"
#include "tandem/common/json_limits.h"
#include "tandem/common/text.h"

namespace tandem::report {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxMetricsLines = 2'000'000;  // ~ years of log intervals; a bound, not a limit in practice

}  // namespace

std::string find_summary(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  if (!fs::is_directory(path, ec)) {
    throw ConfigError("no such file or directory: " + path + ": give a run's summary.json or its run directory");
  }
  for (const char* rel : {"summary.json", "output/data/summary.json"}) {
    if (fs::is_regular_file(fs::path(path) / rel, ec)) return (fs::path(path) / rel).string();
  }
  std::vector<std::string> found;
  for (const fs::directory_entry& host : fs::directory_iterator(path, ec)) {
    const fs::path candidate = host.path() / "output/data/summary.json";
    if (host.is_directory(ec) && fs::is_regular_file(candidate, ec)) found.push_back(candidate.string());
  }
  if (found.size() == 1) return found[0];
  if (found.empty()) {
    throw ConfigError("no summary.json in " + path + " (looked for summary.json, output/data/summary.json and "
                      "<host>/output/data/summary.json): give the summary's path, or check the run finished");
  }
  std::sort(found.begin(), found.end());
  std::string list;
  for (const std::string& f : found) list += (list.empty() ? "" : ", ") + f;
  throw ConfigError("several summaries in " + path + " (" + list + "): give the path of the one you mean");
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read " + path + ": check the path and its permissions");
  std::stringstream text;
  text << in.rdbuf();
  if (json_depth(text.str()) > kMaxJsonDepth) throw ConfigError(path + " nests deeper than a summary does: is it one?");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + " is not valid JSON (" + printable(e.what(), 300) + "): give a summary.json tandem wrote");
  }
  if (!j.is_object()) throw ConfigError(path + " does not hold a JSON object: give a summary.json tandem wrote");
  return j;
}

std::vector<nlohmann::json> read_metrics(const std::string& path, size_t& bad_lines) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read " + path + ": check the path and its permissions");
  std::vector<nlohmann::json> out;
  bad_lines = 0;
  std::string line;
  while (std::getline(in, line) && out.size() < kMaxMetricsLines) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = json_depth(line) > kMaxJsonDepth ? nlohmann::json(nlohmann::json::value_t::discarded)
                                                         : nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
    else ++bad_lines;
  }
  return out;
}

RunFiles load_run(const std::string& path) {
  RunFiles r;
  r.summary_path = find_summary(path);
  r.summary = read_json_file(r.summary_path);
  std::error_code ec;
  const fs::path beside = fs::path(r.summary_path).parent_path() / "metrics.jsonl";
  if (fs::is_regular_file(beside, ec)) {
    r.metrics_path = beside.string();
  } else if (const auto it = r.summary.find("metrics_file"); it != r.summary.end() && it->is_string() &&
                                                              fs::is_regular_file(it->get<std::string>(), ec)) {
    r.metrics_path = it->get<std::string>();
  }
  if (!r.metrics_path.empty()) r.metrics = read_metrics(r.metrics_path, r.bad_metrics_lines);
  const fs::path runs = fs::path(r.summary_path).parent_path() / "runs.jsonl";
  size_t bad_runs = 0;
  if (fs::is_regular_file(runs, ec)) r.runs = read_metrics(runs.string(), bad_runs);
  return r;
}

}  // namespace tandem::report
