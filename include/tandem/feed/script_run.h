// A training script's run measured from its feed (tandem.Feed), as the C++ trainer's run
// is: the time the script waits in next() is its data wait, the time between two batches
// its step. Rank 0 keeps metrics.jsonl while it runs and the summary (run_summary.h) and
// report.html when a feed ends. One run per process: the feeds a script opens one after
// the other (one per epoch) add up; the time between two feeds is not training time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tandem/common/clock.h"
#include "tandem/feed/run_summary.h"
#include "tandem/feed/scheduler.h"
#include "tandem/report/run_log.h"
#include "tandem/report/run_records.h"
#include "tandem/transport/live_metrics.h"

namespace tandem::feed {

struct ScriptRunOptions {
  std::string summary_path;      // summary.json; metrics.jsonl and report.html go beside it
  bool append_metrics = false;   // a resumed run keeps the earlier lines
  int rank = 0;
  int world = 1;
  int log_every = 50;            // batches between two metrics.jsonl lines
  uint64_t steps_per_epoch = 0;  // for the lines' epoch
  std::string sagemaker_root;    // for TensorBoard's folder (tensorboard_dir); "" when none
  // The ranks training now (ranks_training()); null: `world`. The job's throughput is
  // this rank's times that count.
  std::function<int()> ranks;
  // --metrics-port (metrics_port=): serve the run's gauges as Prometheus text while it
  // runs (live_metrics.h), as the trainer's rank 0 does; -1 = off, 0 = a free port.
  int metrics_port = -1;
  std::string metrics_bind = "0.0.0.0";  // --metrics-bind (metrics_bind=)
};

// A job's ranks are WORLD_SIZE, but a rank that exits at once trains nothing: each rank of
// a job of more than one marks that it took a batch (ranks/rank-N beside the summary,
// holding its launcher's process id, so an earlier launch's marks do not count), and rank
// 0 counts as training every rank of its own host (ranks 0 .. local_world-1) that marked,
// and every rank elsewhere, which it cannot see. Best effort: a mark that cannot be
// written is left out, and so is its rank.
// `launch` names the launch of this host's ranks when the launcher says it
// (TANDEM_LAUNCH_ID: simulate's torchrun ranks, each under its own /bin/sh); "" = the
// parent process (torchrun's agent, `tandem launch`).
void mark_rank_training(const std::string& summary_path, int rank, const std::string& launch = "");
int ranks_training(const std::string& summary_path, int world, int local_world, const std::string& launch = "");

class ScriptRun {
 public:
  // Opens metrics.jsonl (creating its directory). Throws std::runtime_error naming the
  // path when it cannot be written.
  explicit ScriptRun(ScriptRunOptions opts);

  // The script asks for the next batch (enters next(); again for each slice of one wait).
  void waiting();
  // It has one: `samples` of them, step `step` of `total_steps`. Writes a metrics line
  // every log_every batches, with `sources()`: the feed's counts so far (they restart
  // with each feed).
  void taken(uint64_t samples, uint64_t step, uint64_t total_steps,
             const std::function<std::vector<SourceStats>()>& sources);
  // The feed's requests in flight when it delivered its last batch, for --metrics-port.
  void note_in_flight(size_t requests) { in_flight_ = static_cast<double>(requests); }
  // The feed ended (or was closed): until the next waiting() nothing counts; the feed's
  // sources are added to the run's.
  void feed_ended(const std::vector<SourceStats>& sources, uint64_t hedged);

  // A signal stopped the script (SIGTERM): the summary says it was interrupted.
  void interrupted() { interrupted_ = true; }

  // What the script reported (feed.log): "loss" or "lr", a finite number. Throws
  // ConfigError naming the fix for another name or a value that is not finite.
  void reported(const std::string& name, double value);
  // The same checks alone (ranks that keep no records).
  static void check_reported(const std::string& name, double value);

  // The run so far as the trainer reports one (its loss: what the script reported, else NaN).
  report::TrainReport report() const;
  // Every feed's sources so far, by name, and their hedged requests.
  const std::vector<SourceStats>& sources() const { return sources_; }
  uint64_t hedged() const { return hedged_; }
  // Writes the summary and report.html. `facts.sources` and `facts.hedged` are replaced
  // by the run's. Returns the summary's path.
  std::string write_summary(RunSummaryFacts facts) const;
  const ScriptRunOptions& options() const { return opts_; }
  int ranks() const { return opts_.ranks ? opts_.ranks() : opts_.world; }

 private:
  void log_point(uint64_t step, uint64_t total_steps, const std::vector<SourceStats>& sources);

  ScriptRunOptions opts_;
  std::unique_ptr<report::MetricsLog> metrics_;
  bool paused_ = true;
  bool asking_ = false;  // between the first waiting() for a batch and taken()
  Clock::time_point first_{}, mark_{}, asked_{};  // first request; end of the last step; this request
  uint64_t steps_ = 0, samples_ = 0;
  uint64_t start_step_ = 0;       // the first step taken (a resumed run)
  double startup_s_ = 0;          // the process's start to its first request
  bool interrupted_ = false;
  // reported() losses, every one: the metric lines give each log window's mean, and the
  // summary's first and final loss are the means of the first and the last log_every of
  // them (half the run's, when it is shorter than two windows).
  std::vector<double> losses_;
  size_t window_first_loss_ = 0;  // losses_[window_first_loss_..] were reported in this window
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();  // the last window's mean
  double last_lr_ = std::numeric_limits<double>::quiet_NaN();
  double training_s_ = 0, wait_s_ = 0;
  uint64_t window_steps_ = 0, window_samples_ = 0;
  double window_s_ = 0, window_wait_s_ = 0;
  int logged_windows_ = 0;                  // log windows written so far
  double steady_samples_ = 0, steady_busy_s_ = 0;  // over the windows after the first (TrainReport)
  std::vector<SourceStats> sources_;  // of the feeds that ended
  uint64_t hedged_ = 0;
  std::atomic<double> in_flight_{0};
  transport::TrainerMetrics live_metrics_;
  std::unique_ptr<transport::MetricsServer> metrics_server_;  // last: it reads the members above
};

}  // namespace tandem::feed
