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
#include "tandem/feed/rank_feed.h"
#include "tandem/report/run_records.h"

namespace tandem::feed {

// What the summary says about the run besides the loop's own report.
struct RunSummaryFacts {
  // The run's settings as the summary keeps them (launch/run_settings.h).
  nlohmann::json settings;
  const RankFeed& feed;              // rank 0's, started and closed
  std::vector<SourceStats> sources;  // what each source delivered (the feed's scheduler's)
  uint64_t hedged = 0;                     // hedged requests (likewise)
  const cluster::Cluster& cluster;   // for the instance types (cluster::cluster_for_plan)
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
nlohmann::json run_summary(const report::TrainReport& train, const RunSummaryFacts& facts);

}  // namespace tandem::feed
