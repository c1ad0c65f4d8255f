// A finished run's summary.json as rank 0 writes it, for the C++ trainer and a training
// script fed by tandem.Feed alike: the loop's own report (make_summary) and what the feed
// knows (each source, what the workers skipped and are, throughput, plan_inputs, the
// settings), then report.html beside it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/cluster/cluster.h"
#include "tandem/common/settings.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/report/run_records.h"

namespace tandem::report {

// What the summary says about the run besides the loop's own report.
struct RunSummaryFacts {
  const Settings& settings;
  const feed::RankFeed& feed;        // rank 0's, started and closed
  std::vector<feed::SourceStats> sources;  // what each source delivered (the feed's scheduler's)
  uint64_t hedged = 0;                     // hedged requests (likewise)
  const cluster::Cluster& cluster;   // for the instance types (cluster_for_plan)
  int world = 1;                     // ranks
  int local_world = 1;               // ranks per trainer host
  int local_threads = 0;             // this rank's preprocessing threads
  int batch_size = 0;                // per rank
  uint64_t steps_per_epoch = 0;
  bool simulated = false;            // `tandem simulate`: instance types are labels
};

// The summary: make_summary(train, ...) with skipped_samples/skipped_files and each
// worker's facts (asked of the workers at once, each bounded by a short deadline),
// throughput, batch_size, global_batch, plan_inputs, settings, hedged_requests,
// steps_per_epoch and epochs.
nlohmann::json run_summary(const TrainReport& train, const RunSummaryFacts& facts);

// The cluster a rank belongs to, for the plan's instance types; never throws (unknown
// types are warned of). `launched`: the rank was started by `tandem launch`, whose
// torchrun variables describe the ranks, not the cluster (that is the one launch found).
cluster::Cluster cluster_for_plan(const Settings& settings, bool launched);

// Writes `summary` to `path` (atomically) and report.html beside it. A report is a
// convenience: a failure to write it is a warning naming `tandem report`, never fatal.
void write_summary_and_report(const std::string& path, const nlohmann::json& summary);

}  // namespace tandem::report
