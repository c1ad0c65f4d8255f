#include "tandem/feed/run_summary.h"

#include <algorithm>
#include <future>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>

#include "tandem/common/files.h"
#include "tandem/report/summary.h"

namespace tandem::feed {
namespace {

using report::WorkerFacts;

// A pool's account of this job, added to the others' (summary["pool"]).
void add_pool_tally(nlohmann::json& pool, const transport::WorkerInfo::PoolTally& t) {
  if (pool.is_null()) pool = {{"pools", 0}, {"samples_served", 0}, {"samples_made", 0}, {"samples_shared", 0}};
  pool["pools"] = pool["pools"].get<uint64_t>() + 1;
  pool["samples_served"] = pool["samples_served"].get<uint64_t>() + t.samples_served;
  pool["samples_made"] = pool["samples_made"].get<uint64_t>() + t.samples_made;
  pool["samples_shared"] = pool["samples_shared"].get<uint64_t>() + t.samples_shared;
}

// Samples substituted under --on-bad-sample skip, here (the feed's own dataset, if any)
// and on every worker, into summary["skipped_samples"/"skipped_files"]; and what each
// worker is. All asked at once, so a hung worker costs one short deadline.
std::vector<WorkerFacts> ask_workers(nlohmann::json& summary, const RankFeed& feed,
                                     const cluster::Cluster& cluster) {
  const data::Dataset* local = feed.local_dataset();
  nlohmann::json files = local ? local->skipped() : std::vector<std::string>{};
  nlohmann::json unrepeatable = nlohmann::json::array();  // users' code that is not deterministic
  uint64_t count = local ? local->skipped_count() : 0;
  std::vector<std::future<transport::WorkerInfo>> answers;
  for (const auto& w : feed.workers()) {
    answers.push_back(std::async(std::launch::async, [&link = *w] { return link.client().info(kReleaseDeadlineS); }));
  }
  std::vector<WorkerFacts> facts;
  std::set<std::string> instances;  // one worker reached at two addresses is counted once
  nlohmann::json pool;  // what pools served this job, made for it and shared (null: no pool)
  for (size_t i = 0; i < answers.size(); ++i) {
    WorkerFacts f{feed.workers()[i]->target(), "", "", 0};
    try {
      const transport::WorkerInfo wi = answers[i].get();
      if (!wi.instance.empty() && !instances.insert(wi.instance).second) continue;
      for (const auto& s : wi.skipped) files.push_back(wi.host + ": " + s);
      count += wi.skipped_count;
      if (!wi.determinism_problem.empty()) unrepeatable.push_back(wi.host + ": " + wi.determinism_problem);
      if (wi.pool) add_pool_tally(pool, *wi.pool);
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
  for (const std::string& seen : feed.scheduler().determinism_problems()) unrepeatable.push_back(seen);
  summary["determinism_problems"] = unrepeatable;
  if (!pool.is_null()) summary["pool"] = pool;
  return facts;
}

}  // namespace

nlohmann::json run_summary(const report::TrainReport& train, const RunSummaryFacts& f) {
  nlohmann::json summary = report::make_summary(train, f.sources);
  const auto workers = ask_workers(summary, f.feed, f.cluster);
  const int local_world = std::max(f.local_world, 1);
  summary["throughput"] = report::throughput(train);
  summary["batch_size"] = f.batch_size;
  summary["global_batch"] = f.batch_size * f.world;
  plan::PlanInputs plan_inputs =
      report::measure_plan_inputs(train, f.sources, workers, f.cluster.current_instance_type,
                          std::max(f.world / local_world, 1), f.local_threads * local_world);  // per host
  // Under simulate every "host" shares this machine's CPU: the instance types are labels.
  plan_inputs.simulated = f.simulated;
  summary["plan_inputs"] = plan::to_json(plan_inputs);
  summary["settings"] = f.settings;
  summary["hedged_requests"] = f.hedged;
  summary["steps_per_epoch"] = f.steps_per_epoch;
  summary["epochs"] =
      f.steps_per_epoch ? static_cast<double>(train.start_step + train.steps) / f.steps_per_epoch : 0.0;
  return summary;
}

}  // namespace tandem::feed
