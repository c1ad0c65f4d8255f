// Finding and reading a finished run's files: its summary.json and the metrics.jsonl the
// trainer writes beside it (one JSON object per log interval).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::report {

struct RunFiles {
  std::string summary_path;
  nlohmann::json summary;
  std::string metrics_path;            // "" when there is none
  std::vector<nlohmann::json> metrics; // the lines that parsed as JSON objects, in file order
  size_t bad_metrics_lines = 0;        // lines skipped (a line cut short by a crash, say)
  std::vector<nlohmann::json> runs;    // runs.jsonl beside the summary: every run of the job, oldest first
};

// The summary.json `path` names: the file itself, or in a directory <dir>/summary.json,
// <dir>/output/data/summary.json, or <dir>/<host>/output/data/summary.json (what
// `tandem simulate` writes). Throws ConfigError when there is none, or several (listing them).
std::string find_summary(const std::string& path);

// Parses a JSON object from `path`. Throws ConfigError naming the file and the fix.
nlohmann::json read_json_file(const std::string& path);

// The lines of a metrics.jsonl that are JSON objects; counts the others in `bad_lines`.
// Throws ConfigError when the file cannot be read.
std::vector<nlohmann::json> read_metrics(const std::string& path, size_t& bad_lines);

// find_summary, the summary, and the metrics: metrics.jsonl beside the summary, else the
// summary's "metrics_file" when that exists (a run dir copied elsewhere keeps working).
RunFiles load_run(const std::string& path);

}  // namespace tandem::report
