#include "tandem/report/output_root.h"

#include <ctime>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/common/text.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOutputDir = "tandem-output";

// run-YYYYMMDD-HHMMSS in local time, with -2, -3, ... when a run of the same second took it.
fs::path fresh_run_folder(const fs::path& parent) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "run-%Y%m%d-%H%M%S", &local);
  fs::path dir = parent / stamp;
  for (int n = 2; fs::exists(dir); ++n) dir = parent / fmt::format("{}-{}", stamp, n);
  return dir;
}

}  // namespace

std::string output_folder_name(const std::string& job) {
  std::string name = job;
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '-';
  }
  return name == "." || name == ".." ? "" : name;
}

std::string records_reserve(const std::string& root) { return root + "/output/.tandem-reserve"; }

std::string output_root(const std::string& sagemaker_root, const std::string& job_name, int rank) {
  const std::string& root = sagemaker_root;
  std::error_code ec;
  if (fs::is_directory(root, ec)) return root;
  if (rank != 0) return "";
  const fs::path parent = fs::absolute(kOutputDir, ec);
  const std::string job = output_folder_name(job_name);
  const fs::path dir = job.empty() ? fresh_run_folder(parent) : parent / job;
  fs::create_directories(dir, ec);
  if (ec) {
    spdlog::warn("no SageMaker root at {}, and {} cannot be made ({}): checkpoints and the model are not written; "
                 "point --sagemaker-root at a writable directory to keep them",
                 printable(root), dir.string(), ec.message());
    return "";
  }
  spdlog::info("no SageMaker root at {}: this run's summary, checkpoints and model go to {}{}", printable(root),
               dir.string(),
               job.empty() ? " (--sagemaker-root " + dir.string() + " resumes it if it stops early)"
                           : " (a restart of job " + job + " resumes there)");
  return dir.string();
}

}  // namespace tandem::report
