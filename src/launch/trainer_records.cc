#include "trainer_records.h"

#include <algorithm>
#include <filesystem>
#include <future>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/cluster/cluster.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/feed/sample_audit.h"
#include "tandem/report/html_report.h"
#include "tandem/report/summary.h"
#include "output_root.h"

namespace tandem::launch {
namespace {

// Samples substituted under --on-bad-sample skip, here (`local`, may be null) and on
// every worker, into summary["skipped_samples"/"skipped_files"]; and what each worker is.
// All asked at once, so a hung worker costs one short deadline.
std::vector<report::WorkerFacts> ask_workers(nlohmann::json& summary, const feed::RankFeed& feed,
                                             const cluster::Cluster& cluster) {
  const data::Dataset* local = feed.local_dataset();
  nlohmann::json files = local ? local->skipped() : std::vector<std::string>{};
  uint64_t count = local ? local->skipped_count() : 0;
  std::vector<std::future<transport::WorkerInfo>> answers;
  for (const auto& w : feed.workers()) {
    answers.push_back(std::async(std::launch::async, [&link = *w] { return link.client().info(feed::kReleaseDeadlineS); }));
  }
  std::vector<report::WorkerFacts> facts;
  for (size_t i = 0; i < answers.size(); ++i) {
    report::WorkerFacts f{feed.workers()[i]->target(), "", "", 0};
    try {
      const transport::WorkerInfo wi = answers[i].get();
      for (const auto& s : wi.skipped) files.push_back(wi.host + ": " + s);
      count += wi.skipped_count;
      f.host = wi.host;
      f.threads = wi.threads;
      for (const auto& g : cluster.groups) {
        if (std::find(g.hosts.begin(), g.hosts.end(), wi.host) != g.hosts.end()) f.instance_type = g.instance_type;
      }
    } catch (const std::exception& e) {
      spdlog::warn("could not ask {} which samples it skipped: {}", f.address, e.what());
    }
    facts.push_back(std::move(f));
  }
  summary["skipped_samples"] = count;
  summary["skipped_files"] = files;
  return facts;
}

// The cluster this rank belongs to, for the plan's instance types. Ranks that `tandem
// launch` started carry torchrun's variables (and TANDEM_GLOO_ADDRESS); the cluster they
// belong to is the one launch found, not one made of those variables.
cluster::Cluster cluster_for_plan(const Settings& settings) {
  try {
    const bool launched = !settings.launcher.gloo_address.empty();
    return cluster::discover(settings.cluster, [launched](const std::string& name) -> std::optional<std::string> {
      if (launched && (name == "WORLD_SIZE" || name == "RANK" || name == "GROUP_RANK")) return std::nullopt;
      return cluster::process_env(name);
    });
  } catch (const std::exception& e) {
    spdlog::warn("instance types unknown for the plan: {}", e.what());
    return {};
  }
}

nlohmann::json make_run_summary(const training::TrainReport& result, const RunFacts& f,
                                 const std::vector<std::string>& audits) {
  const feed::Scheduler& scheduler = f.feed.scheduler();
  nlohmann::json summary = report::make_summary(result, scheduler.stats());
  const cluster::Cluster cluster = f.cluster ? *f.cluster : cluster_for_plan(f.settings);
  const auto workers = ask_workers(summary, f.feed, cluster);
  const int local_world = std::max(f.dist.local_world, 1);
  summary["throughput"] = report::throughput(result);
  summary["batch_size"] = f.batch_size;
  summary["global_batch"] = f.batch_size * f.dist.world;
  plan::PlanInputs plan_inputs =
      report::measure_plan_inputs(result, scheduler.stats(), workers, cluster.current_instance_type,
                                  std::max(f.dist.world / local_world, 1), f.local_threads * local_world);  // per host
  // Under simulate every "host" shares this machine's CPU: the instance types are labels.
  plan_inputs.simulated = f.settings.launcher.simulated_host;
  summary["plan_inputs"] = plan::to_json(plan_inputs);
  if (!audits.empty()) {
    std::vector<nlohmann::json> reports;
    for (const std::string& a : audits) reports.push_back(nlohmann::json::parse(a));
    summary["sample_audit"] = feed::SampleAudit::merge(reports);
  }
  summary["settings"] = report::run_settings(f.settings, f.feed.info());
  summary["hedged_requests"] = scheduler.hedged();
  summary["steps_per_epoch"] = f.steps_per_epoch;
  summary["epochs"] =
      f.steps_per_epoch ? static_cast<double>(result.start_step + result.steps) / f.steps_per_epoch : 0.0;
  return summary;
}

// Writes the summary and the report beside it (a plan needs the instance types and a
// price table: the page says so when it cannot make one). A report is a convenience:
// never fatal.
void write_summary_and_report(const std::string& path, const nlohmann::json& summary) {
  write_file_atomically(path, summary.dump(2) + "\n");
  try {
    spdlog::info("report in {}", report::write_run_report(path));
  } catch (const std::exception& e) {
    spdlog::warn("no report.html: {} (tandem report {} makes one later)", e.what(), path);
  }
}

}  // namespace

RunFiles run_files(const Settings& settings, int rank) {
  RunFiles f;
  f.root = output_root(settings, rank);
  if (!f.root.empty()) f.paths = {f.root + "/checkpoints", f.root + "/model"};
  const std::string& explicit_summary = settings.trainer.summary_json;
  f.summary = explicit_summary.empty() ? f.root + "/output/data/summary.json" : explicit_summary;
  f.keep = !f.root.empty() || !explicit_summary.empty();
  return f;
}

LiveRecords::LiveRecords(const RunFiles& files, int rank, bool resumed, uint64_t steps_per_epoch, bool quiet) {
  if (rank != 0) return;
  if (files.keep) {
    const std::filesystem::path dir = std::filesystem::path(files.summary).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir);
    metrics_ = std::make_unique<report::MetricsLog>((dir / "metrics.jsonl").string(), resumed, steps_per_epoch);
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
  if (files.keep) {
    write_summary_and_report(files.summary, summary);
    where = files.summary;
  }
  spdlog::info("training {}: {}, loss {:.4f} -> {:.4f}, {:.1f} samples/s; summary in {}",
               result.interrupted ? "interrupted" : "finished", counted(result.steps, "step"), result.first_loss,
               result.final_loss, result.samples_per_sec * facts.dist.world, where);
  if (!result.model_file.empty()) spdlog::info("trained model in {}", result.model_file);
}

}  // namespace tandem::launch
