#include "sweep_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tandem/plan/planner.h"

namespace tandem::plan {

nlohmann::json sweep_section(const ModelParams& mp, const nlohmann::json& row, int jobs, bool priced) {
  const int alone = row["workers"].get<int>();
  const double rate = row["samples_per_sec"].get<double>();
  const double made = std::max(0.0, rate - mp.local);  // what the workers make for one job
  const double sent = made * jobs;
  const int cores = mp.per_worker > 0 ? static_cast<int>(std::ceil(made / mp.per_worker - 1e-9)) : alone;
  const int network = std::isfinite(mp.worker_network) && mp.worker_network > 0
                          ? static_cast<int>(std::ceil(sent / mp.worker_network - 1e-9)) : 0;
  const int shared = std::max({cores, network, alone > 0 ? 1 : 0});
  nlohmann::json s = {{"jobs", jobs},
                      {"separate_workers", alone * jobs},
                      {"shared_workers", shared},
                      {"limit", network > cores ? "worker network" : "cores"},
                      {"samples_made_per_sec", made},
                      {"samples_sent_per_sec", sent}};
  if (priced) {
    s["separate_usd_per_hour"] = alone * jobs * mp.worker_usd_per_hour;
    s["shared_usd_per_hour"] = shared * mp.worker_usd_per_hour;
    s["saving"] = alone > 0 ? 1.0 - static_cast<double>(shared) / (alone * jobs) : 0.0;
  }
  return s;
}

std::string sweep_text(const nlohmann::json& p) {
  if (!p.contains("sweep")) return "";
  const nlohmann::json& s = p["sweep"];
  const int jobs = s["jobs"].get<int>();
  std::string out = "A sweep of " + std::to_string(jobs) + " such jobs (the same data, pipeline, seed and batch "
                    "geometry) on one pool (tandem worker --pool-jobs): " +
                    std::to_string(s["shared_workers"].get<int>()) + " worker instance(s) instead of " +
                    std::to_string(s["separate_workers"].get<int>()) + " (" + std::to_string(jobs) + " x " +
                    std::to_string(p["recommended"]["workers"].get<int>()) + "): each sample made once (" +
                    group_thousands(s["samples_made_per_sec"].get<double>(), 0) + "/s) and sent to every job (" +
                    group_thousands(s["samples_sent_per_sec"].get<double>(), 0) + "/s), held by its " +
                    s["limit"].get<std::string>();
  if (s.contains("shared_usd_per_hour")) {
    out += "; workers $" + group_thousands(s["shared_usd_per_hour"].get<double>(), 2) + "/h instead of $" +
           group_thousands(s["separate_usd_per_hour"].get<double>(), 2) + "/h (" +
           group_thousands(100.0 * s["saving"].get<double>(), 0) + "% less)";
  }
  return out + ". The pool's copies and sending cost some CPU beyond this count (docs/benchmarks.md, \"A sweep on one "
               "pool\"), and jobs share only while they ask within --share-window-mb of each other.";
}

}  // namespace tandem::plan
