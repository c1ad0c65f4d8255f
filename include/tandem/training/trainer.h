// The training loop. This header is Torch-free so the launch code that calls it (and
// that speaks gRPC) never parses LibTorch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data/batching/sampler.h"
#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"
#include "tandem/report/run_records.h"
#include "tandem/training/run_types.h"
#include "tandem/training/trainer_options.h"

namespace tandem::training {

// What a run reports as it goes (rank 0 only). Every member may be empty.
struct RunObserver {
  std::function<void(const LogPoint&)> on_log;
  // Every step and at each evaluation or checkpoint (`phase` "train", "eval", "checkpoint"):
  // for a live status line.
  std::function<void(int64_t step, int64_t total, const char* phase)> on_progress;
  // During an evaluation: rank 0's samples scored and its share of the held-out set.
  std::function<void(int64_t done, int64_t total)> on_eval_progress;
  bool log_lines = true;  // the plain "step=..." metric lines
};

// Limits on one call of Trainer::run, for benchmarks.
struct RunLimits {
  int64_t max_steps = -1;  // stop after this many steps (the next call continues); -1 = to loop.steps
  // Upload the first batch once and train on it every step: the training loop alone,
  // with no data path, i.e. the ceiling the feed is measured against.
  bool resident = false;
};

class Trainer {
 public:
  // Builds the model and optimizer (config.model, config.optimizer), joins the process
  // group (when dist.world > 1), resumes from the newest valid checkpoint in
  // paths.checkpoint_dir (rank 0 reads it and shares it), and makes every rank's
  // parameters equal to rank 0's. `config` comes from derive_rank_options (or
  // trainer_config). `eval` (may be null) is the held-out set; every rank evaluates its
  // share of it. On a GPU, the rank uses GPU LOCAL_RANK and batch buffers become pinned
  // host memory. A TorchScript model with training_step trains on every field of the
  // dataset (and `eval` is not used: a warning says so); any other model needs an 'image'
  // and a 'label'. Throws ConfigError when this host has more ranks than GPUs, when the
  // model does not fit the data (build_model), and when the dataset has no 'image' or no
  // 'label' field for a model without training_step (data::classification_problem).
  Trainer(const TrainerConfig& config, const data::DatasetInfo& info, const DistInfo& dist, const RunPaths& paths,
          std::shared_ptr<const data::Dataset> eval = nullptr);
  ~Trainer();

  // "cpu" or "cuda:N".
  std::string device() const;

  // The first step this run trains; batches must start at this sequence number.
  int64_t start_step() const;
  // The checkpoint it resumed from, "" when it started afresh.
  std::string resumed_from() const;
  // Where that checkpoint was in the data and its geometry (every rank knows it); nullopt
  // when it started afresh or the checkpoint does not say (written before tandem kept it).
  std::optional<data::DataPosition> resumed_position() const;

  // The run's steps meet the data at `anchor` (the feed's; checkpoints record their
  // place by it) and end at `steps` (--epochs' end as the anchor cuts them), which also
  // sets the learning-rate schedule's length. REQUIRES: before run().
  void follow(const data::DataAnchor& anchor, int64_t steps);

  // Trains until loop.steps, the end of the batches, or `stop` on any rank (every rank
  // stops at the same step; rank 0 then checkpoints). Logs a metrics line every
  // loop.log_every steps (rank 0). Writes checkpoints and, when finished, the model.
  // Each call continues from the step the previous one reached.
  TrainReport run(const NextBatch& next, const std::atomic<bool>& stop, const RunLimits& limits = {},
                  const RunObserver& observer = {});

  // Waits for every rank (e.g. before rank 0 releases the data workers).
  void barrier();

  // Every rank's `mine`, in rank order, on rank 0 (through the rendezvous store); empty
  // on the other ranks. Every rank must call it with the same `key`.
  std::vector<std::string> gather(const std::string& key, const std::string& mine);

  // Top-1 accuracy on the held-out set: each rank scores every world-th sample from its
  // rank on, and the counts are summed. Every rank must call it. REQUIRES: an eval set.
  double evaluate();

 private:
  friend class RunLoop;  // train_loop.cc: the loop run() drives
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How many GPUs this process sees.
int cuda_device_count();

// Throws ConfigError when `procs` ranks on this host would have to share GPUs.
void check_ranks_fit_gpus(int procs);

// Sets LibTorch's intra-op thread count for this process.
void set_torch_threads(int threads);

}  // namespace tandem::training
