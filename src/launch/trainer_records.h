// Internal to the trainer role: what a rank writes about its run. Rank 0 keeps
// metrics.jsonl and a status line while it trains, then the summary (with what the
// workers skipped and are, for the plan) and the HTML report.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tandem/cluster/cluster.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/launch/settings.h"
#include "tandem/report/run_log.h"
#include "tandem/training/trainer.h"

namespace tandem::launch {

// Where a run's files go.
struct RunFiles {
  std::string root;          // the output folder (output_root.h); "" when this rank writes none
  bool keep = false;         // the summary, metrics and report are written
  std::string summary;       // the summary's path (metrics.jsonl and report.html beside it)
  training::RunPaths paths;  // checkpoints and the final model; empty = not written
};

// From the output folder (output_root.h: the SageMaker root, else ./tandem-output/...)
// and --summary-json.
RunFiles run_files(const Settings& settings, int rank);

// A run that failed (rank 0): its summary says why and with which code, and report.html
// and runs.jsonl show it, so a failed run is never missing from its folder. Never throws.
void write_failed_run(const RunFiles& files, const Settings& settings, const std::string& failure, int code);

// Before the first step, on the rank that writes them (rank 0): every folder the run will
// write (the model, the checkpoints, the summary's) can be written. Throws ConfigError
// naming each that cannot, why (a read-only file system, a full disk, a permission) and
// the fix, so that no GPU time is spent on weights that could not be kept. Then holds
// the output folder's room for its last records (report::records_reserve).
void check_writable(const RunFiles& files);

// Rank 0's records while it trains: metrics.jsonl beside the summary and, on a
// terminal, a status line. Other ranks keep none.
class LiveRecords {
 public:
  // `quiet`: no status line (--quiet).
  LiveRecords(const RunFiles& files, int rank, bool resumed, uint64_t steps_per_epoch, bool quiet);
  // What the training loop reports to, reading each source's numbers from `scheduler`
  // (which outlives the run).
  training::RunObserver observer(const feed::Scheduler& scheduler);
  // Ends the status line, so plain log lines follow. Idempotent.
  void end_status() { status_.reset(); }
  const report::MetricsLog* metrics() const { return metrics_.get(); }

 private:
  std::unique_ptr<report::MetricsLog> metrics_;
  std::unique_ptr<report::StatusLine> status_;
};

// What the summary says about the run besides the training loop's own report.
struct RunFacts {
  const Settings& settings;
  const feed::RankFeed& feed;
  const training::DistInfo& dist;
  const cluster::Cluster* cluster = nullptr;  // null: discovered when the summary is written
  int local_threads = 0;  // this rank's preprocessing threads
  uint64_t steps_per_epoch = 0;
  int batch_size = 0;
};

// Rank 0, after the run: asks the workers what they skipped and are, writes the summary
// and the report (when files.keep), and logs how training ended and where the summary is.
// `audits` is every rank's sample audit (empty without --audit-samples).
void write_run_records(const RunFiles& files, LiveRecords& live, const training::TrainReport& result,
                       const RunFacts& facts, const std::vector<std::string>& audits);

}  // namespace tandem::launch
