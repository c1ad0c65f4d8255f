#include "trainer_records.h"

#include <algorithm>
#include <filesystem>
#include <future>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/cluster/cluster.h"
#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/feed/run_summary.h"
#include "tandem/feed/sample_audit.h"
#include "tandem/launch/run_settings.h"
#include "tandem/report/html_report.h"
#include "tandem/report/output_root.h"
#include "tandem/report/summary.h"

namespace tandem::launch {
namespace {

nlohmann::json make_run_summary(const training::TrainReport& result, const RunFacts& f,
                                 const std::vector<std::string>& audits) {
  const LauncherEnv& launcher = f.settings.launcher;
  const cluster::Cluster cluster =
      f.cluster ? *f.cluster : cluster::cluster_for_plan(f.settings.cluster, launcher, launcher.rank_group);
  const feed::Scheduler& scheduler = f.feed.scheduler();
  feed::RunSummaryFacts facts{run_settings(f.settings, f.feed.info()), f.feed, scheduler.stats(), scheduler.hedged(),
                              cluster};
  facts.world = f.dist.world;
  facts.local_world = std::max(f.dist.local_world, 1);
  facts.local_threads = f.local_threads;
  facts.batch_size = f.batch_size;
  facts.steps_per_epoch = f.steps_per_epoch;
  facts.simulated = f.settings.launcher.simulated_host;
  nlohmann::json summary = feed::run_summary(result, facts);
  if (!audits.empty()) {
    std::vector<nlohmann::json> reports;
    for (const std::string& a : audits) reports.push_back(nlohmann::json::parse(a));
    const nlohmann::json& a = summary["sample_audit"] = feed::SampleAudit::merge(reports);
    const auto n = [&](const char* key) { return a[key].get<uint64_t>(); };
    std::string counts = fmt::format("{} samples planned, {} consumed: {} missing, {} duplicated, {} unplanned",
                                           n("planned"), n("consumed"), n("missing"), n("duplicated"), n("unplanned"));
    const std::string tail = a.value("dropped", uint64_t{0}) == 0 ? "" : fmt::format(
        "; {} samples of the resumed epoch's order, fewer than one global batch, are its dropped tail", n("dropped"));
    counts += tail;
    if (n("missing") + n("duplicated") + n("unplanned") == 0) {
      spdlog::info("sample audit: every planned sample exactly once ({})", counts);
    } else {
      spdlog::warn("sample audit: {} (per epoch in the summary's sample_audit)", counts);
    }
  }
  return summary;
}

}  // namespace

RunFiles run_files(const Settings& settings, int rank) {
  RunFiles f;
  f.root = report::output_root(settings.cluster.sagemaker_root, settings.security.job, rank);
  if (!f.root.empty()) f.paths = {f.root + "/checkpoints", f.root + "/model"};
  const std::string& explicit_summary = settings.trainer.summary_json;
  f.summary = explicit_summary.empty() ? f.root + "/output/data/summary.json" : explicit_summary;
  f.keep = !f.root.empty() || !explicit_summary.empty();
  return f;
}

void check_writable(const RunFiles& files) {
  std::vector<std::pair<std::string, std::string>> places = {{"the final model", files.paths.model_dir},
                                                             {"checkpoints", files.paths.checkpoint_dir}};
  if (files.keep) places.emplace_back("the summary and metrics", std::filesystem::path(files.summary).parent_path());
  std::string problems;
  for (const auto& [what, dir] : places) {
    if (dir.empty()) continue;
    const std::string why = unwritable_reason(dir);
    if (!why.empty()) problems += (problems.empty() ? "" : "; ") + what + ": " + why;
  }
  if (!problems.empty()) {
    throw ConfigError("this run could not keep what it trains: " + problems +
                      ". Fix those folders (or point --sagemaker-root, --summary-json elsewhere) before training");
  }
  // Room for the summary and output/failure should the model or checkpoints fill the disk.
  if (!files.root.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(files.root + "/output", ec);
    if (!hold_reserve(report::records_reserve(files.root), report::kRecordsReserveBytes)) {
      spdlog::warn("{}/output has less than 1 MiB free: should the model fill the disk, the summary and "
                   "output/failure may not be written", files.root);
    }
  }
}

LiveRecords::LiveRecords(const RunFiles& files, int rank, bool resumed, uint64_t steps_per_epoch, bool quiet) {
  if (rank != 0) return;
  if (files.keep) {
    const std::filesystem::path dir = std::filesystem::path(files.summary).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir);
    metrics_ = std::make_unique<report::MetricsLog>((dir / "metrics.jsonl").string(), resumed, steps_per_epoch);
    metrics_->add_tensorboard(report::tensorboard_dir(files.root, dir.string()));
  }
  if (report::StatusLine::wanted(quiet)) status_ = std::make_unique<report::StatusLine>();
}

training::RunObserver LiveRecords::observer(const feed::Scheduler& scheduler) {
  training::RunObserver observer;
  observer.log_lines = !status_;
  observer.on_log = [this, &scheduler](const training::LogPoint& p) {
    if (metrics_) metrics_->write(p, scheduler.stats());
    if (status_) status_->metrics(p);
  };
  if (status_) {
    observer.on_progress = [this](int64_t s, int64_t t, const char* phase) { status_->progress(s, t, phase); };
    observer.on_eval_progress = [this](int64_t done, int64_t total) { status_->eval_progress(done, total); };
  }
  return observer;
}

void write_run_records(const RunFiles& files, LiveRecords& live, const training::TrainReport& result,
                       const RunFacts& facts, const std::vector<std::string>& audits) {
  live.end_status();
  nlohmann::json summary = make_run_summary(result, facts, audits);
  std::string where = "(not written: no output folder; use --summary-json or --sagemaker-root)";
  if (live.metrics()) summary["metrics_file"] = live.metrics()->path();
  if (!files.root.empty()) release_reserve(report::records_reserve(files.root));  // room for these
  if (files.keep) {
    report::write_summary_and_report(files.summary, summary);
    where = files.summary;
  }
  spdlog::info("training {}: {}, loss {:.4f} -> {:.4f}, {:.1f} samples/s; summary in {}",
               result.interrupted ? "interrupted" : "finished", counted(result.steps, "step"), result.first_loss,
               result.final_loss, result.samples_per_sec * facts.dist.world, where);
  if (!result.model_file.empty()) spdlog::info("trained model in {}", result.model_file);
}

void write_failed_run(const RunFiles& files, const Settings& settings, const std::string& failure, int code) {
  if (!files.keep) return;
  if (!files.root.empty()) release_reserve(report::records_reserve(files.root));
  const nlohmann::json summary = {{"model", settings.trainer.model},
                                  {"failure", failure},
                                  {"exit_code", code},
                                  {"interrupted", false},
                                  {"steps", 0}};
  try {
    report::write_summary_and_report(files.summary, summary);
  } catch (const std::exception& e) {
    spdlog::error("could not write the failed run's summary {}: {}", files.summary, e.what());
  }
}

}  // namespace tandem::launch
