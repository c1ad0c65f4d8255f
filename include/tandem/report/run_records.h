// What a training run reports: its totals at the end (TrainReport) and a point at every
// log step (LogPoint). Plain records, defined here below the training layer, so that the
// report layer (summary, metrics, plan inputs) reads them without depending on training.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::report {

// Where training time went, in seconds summed over the run's steps.
struct StepTimes {
  double data_wait = 0;         // waiting for the next batch (on a GPU: the GPU sat idle)
  double host_to_device = 0;    // copying and converting batches (on a GPU: a side stream, overlapped)
  double forward_backward = 0;
  double communication = 0;     // gradient allreduce not hidden behind backward
  double optimizer = 0;         // clipping and the optimizer step
  double script = 0;            // a script fed by tandem.Feed: its own work between batches (not split)
};

struct TrainReport {
  int64_t start_step = 0;         // > 0 when resumed from a checkpoint
  int64_t steps = 0;              // steps this run took
  int64_t samples = 0;            // this rank's
  double wall_seconds = 0;
  double startup_seconds = 0;     // the process's start to this run's first step
  double paused_seconds = 0;      // of wall_seconds, evaluating and writing checkpoints
  double samples_per_sec = 0;     // this rank's, over training time (wall less paused)
  double data_wait_seconds = 0;
  double data_wait_fraction = 0;  // of training time, spent waiting for the next batch
  // Over the log windows after the first (the first steps' warm-up left out): samples,
  // and training seconds not spent waiting for data. The loop's ceiling is taken from
  // them when there are any.
  double steady_samples = 0;
  double steady_busy_seconds = 0;
  StepTimes step_times;
  int64_t grad_buckets = 0;               // allreduce buckets per step (world > 1)
  int64_t grad_buckets_overlapped = 0;    // of all sent this run, how many left during backward
  double first_loss = 0;
  double final_loss = 0;
  std::vector<double> losses;     // one per step, from start_step
  bool interrupted = false;       // stopped early by `stop`
  std::string device;             // "cpu" or "cuda:0"
  // Seen in the first step, not taken from the flags: the model's output dtype
  // ("bfloat16" under --amp bf16 autocast, else "float32") and the layout of the input
  // and of every 4-d parameter ("channels_last" with --channels-last, else "contiguous").
  std::string compute_dtype;
  std::string memory_layout;
  std::string model;
  int torch_threads = 0;
  int rank = 0;
  int world = 1;
  std::vector<std::string> param_checksums;  // per rank: FNV-1a of every parameter's bytes
  std::string last_checkpoint;    // path, if this run wrote one
  int64_t checkpoints = 0;        // written by this run (rank 0)
  double checkpoint_seconds = 0;  // writing them, in all
  std::string model_file;         // the final model, written by rank 0
  // Why the final model could not be written (a read-only or full model folder), and
  // which checkpoint holds its weights instead; "" when it was written.
  std::string model_error;
  std::optional<double> eval_accuracy;  // the last evaluation's top-1 accuracy
  std::vector<std::pair<int64_t, double>> eval_history;  // (step, accuracy)
};

// One point of the run's metrics (metrics.jsonl), made on rank 0 at every log step, and
// at an evaluation between log steps (then only step, elapsed_s and eval_accuracy are set).
struct LogPoint {
  bool training = true;
  int64_t step = 0;                  // steps done
  int64_t total_steps = 0;
  double elapsed_s = 0;              // since this run started
  double window_s = 0;               // training time since the previous log step (pauses excluded)
  double samples_per_sec = 0;        // every rank together, over the log window's training time
  double samples_per_sec_per_rank = 0;
  double data_wait_pct = 0;
  double loss = 0;                   // the window's last step
  double lr = 0;
  StepTimes step_ms;                 // the window's mean per step, in milliseconds
  std::optional<double> eval_accuracy;
};

// What one source of batches (a data worker, this host's own threads: kLocalSource)
// delivered, as the feed's scheduler counts it.
struct SourceStats {
  std::string name;
  uint64_t batches = 0;        // delivered to the training loop
  uint64_t samples = 0;
  double compute_seconds = 0;  // CPU-seconds the source reported for its batches
  uint64_t bytes = 0;          // what its batches carried (data::Batch::payload_bytes)
  bool failed = false;
  std::string error;           // why it failed (the last failure, for one that rejoined)
  int rejoins = 0;             // times it failed, recovered and served again
  uint64_t ahead = 0;          // requests it was given beyond the line, due later (slower than the window)
  std::string left;            // why it left politely (leave()): a draining worker, one no longer listed; "" = it did not
  uint64_t hedged = 0;         // its requests also given to another source because they were late
  int threads = 0;             // the threads making its batches, as it said (0 = not known)
  int depth = 0;               // requests it may hold now (its window; request_depth.h)
  int deepest = 0;             // the most it was allowed to hold
};

// The name of the source that is this process's own preprocessing threads.
inline constexpr const char* kLocalSource = "local";

}  // namespace tandem::report
