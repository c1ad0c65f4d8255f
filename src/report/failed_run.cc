#include "tandem/report/failed_run.h"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/files.h"
#include "tandem/report/html_report.h"
#include "tandem/report/summary.h"

namespace tandem::report {
namespace {

// The summary at `path` when it was written since `since`; null otherwise.
nlohmann::json fresh_summary(const std::string& path, double since) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || static_cast<double>(st.st_mtim.tv_sec) + 1 < since) return nullptr;
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() ? j : nlohmann::json();
}

// runs.jsonl beside `summary_path`, its last line given the failure (the run's own line).
void amend_last_run(const std::string& summary_path, const std::string& failure, int code) {
  const std::string path = (std::filesystem::path(summary_path).parent_path() / "runs.jsonl").string();
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  nlohmann::json last = lines.empty() ? nlohmann::json() : nlohmann::json::parse(lines.back(), nullptr, false);
  if (!last.is_object()) return append_run(summary_path, {{"failure", failure}, {"exit_code", code}});
  last["failure"] = failure;
  last["exit_code"] = code;
  lines.back() = last.dump();
  std::ostringstream out;
  for (const std::string& line : lines) out << line << "\n";
  write_file_atomically(path, out.str());
}

}  // namespace

void record_failed_run(const std::string& path, const std::string& program, const std::string& failure, int code,
                       double since) {
  try {
    nlohmann::json summary = fresh_summary(path, since);
    if (summary.is_object()) {
      summary["failure"] = failure;
      summary["exit_code"] = code;
      write_file_atomically(path, summary.dump(2) + "\n");
      amend_last_run(path, failure, code);
      spdlog::info("report in {}", write_run_report(path));
      return;
    }
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    write_summary_and_report(path, {{"program", program}, {"failure", failure}, {"exit_code", code},
                                    {"interrupted", false}, {"steps", 0}});
  } catch (const std::exception& e) {
    spdlog::error("could not record the failed run in {}: {}", path, e.what());
  }
}

}  // namespace tandem::report
