// The trainer's components each take their own options (the model, the optimizer and its
// schedule, the loop, checkpoints), and a rank its thread split: all derived once, here,
// from the settings (TrainerOptions) and what is known once the dataset is (its size, for
// --epochs; who makes its batches, for the threads). Torch-free.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/data/core/dataset.h"
#include "tandem/data/core/options.h"
#include "tandem/training/options.h"
#include "tandem/training/run_types.h"

namespace tandem::training {

// Where a run's files go (RunPaths: checkpoints, the final model) is not here: the
// launcher picks that folder at run time (output_root.h), after these are derived.

// The model: what it is and how it computes. Defaults are TrainerOptions' (the
// TrainerConfig tests hold them equal).
struct ModelOptions {
  std::string name = "small_cnn";  // --model
  std::string amp = "none";        // --amp: none | bf16
  bool channels_last = false;      // --channels-last
  bool overlap_grad_sync = true;   // --grad-sync overlap (else after-backward)
  bool operator==(const ModelOptions&) const = default;
};

// The optimizer and its learning-rate schedule: linear warmup over warmup_steps, then
// constant or cosine decay to 0 at `steps`.
struct OptimizerOptions {
  std::string optimizer = "sgd";      // --optimizer: sgd (momentum) | adam | adamw
  double lr = 0.05;                   // --lr: the peak
  double momentum = 0.9;              // --momentum (sgd)
  double weight_decay = 0;            // --weight-decay
  bool fused = true;                  // --fused-optimizer, where LibTorch has the kernels
  double clip_grad_norm = 0;          // --clip-grad-norm: 0 = off
  int64_t warmup_steps = 0;           // --warmup-steps
  std::string schedule = "constant";  // --lr-schedule: constant | cosine
  int64_t steps = 300;                // the run's last step, as LoopOptions::steps
  bool operator==(const OptimizerOptions&) const = default;
};

// The loop: how far it goes, and how often it logs and evaluates.
struct LoopOptions {
  int64_t steps = 300;     // the run's last step (--steps, or --epochs x steps per epoch)
  int log_every = 20;      // --log-every
  int64_t eval_every = 0;  // --eval-every: 0 = at the end only (with an eval set)
  double step_ms = 0;      // --emulate-step-ms: simulations only (pad_step); 0 = off
  int batch_size = 0;      // --batch-size, per rank: the data position a checkpoint keeps; 0 = not known
  bool operator==(const LoopOptions&) const = default;
};

// Batch-level mixing and label smoothing (batch_mix.h), drawn per batch from (seed,
// step, rank) alone, so a resumed run mixes its batches as the uninterrupted one did.
struct MixOptions {
  double mixup = 0;            // --mixup ALPHA: 0 = off
  double cutmix = 0;           // --cutmix ALPHA: 0 = off; with --mixup, one of the two per batch
  double label_smoothing = 0;  // --label-smoothing EPS: 0 = off
  uint64_t seed = 0;           // --seed (the data's): with the step and the rank, fixes each draw
  // Whether the model trains on soft targets ([N, classes] float) rather than labels.
  bool soft_targets() const { return mixup > 0 || cutmix > 0 || label_smoothing > 0; }
  bool operator==(const MixOptions&) const = default;
};

// Checkpoints: how often and how many. They go to RunPaths::checkpoint_dir (none when it
// is empty), and a run resumes from the newest valid one there.
struct CheckpointOptions {
  // --checkpoint-every: steps between them; 0 = only on a stop or a failure; -1 = auto:
  // the first after kAutoFirstCheckpoint steps measures their cost C, then every
  // sqrt(2 C / interruptions) seconds of training (Young's interval; plan/spot.h).
  int64_t every = 0;
  int keep = 3;       // --keep-checkpoints: the newest K
  bool resume_any = false;  // --resume-any: resume a checkpoint another job (model, optimizer, dataset) wrote
  double interruptions_per_hour = 0;  // the job's spot interruptions, for auto
  bool operator==(const CheckpointOptions&) const = default;
};

// Everything a Trainer reads, by component.
struct TrainerConfig {
  ModelOptions model;
  OptimizerOptions optimizer;
  LoopOptions loop;
  CheckpointOptions checkpoints;
  MixOptions mix;
};

// The components' options from the flags, for a run whose last step is `steps` (the
// mixing seed is the data's: the caller sets mix.seed from DataOptions::seed).
TrainerConfig trainer_config(const TrainerOptions& opts, int64_t steps);

// What a rank's host offers, for the thread split.
struct RankHost {
  int cores = 1;                // usable on this host (available_cores)
  int gpus = 0;                 // visible to this process
  bool local_data = false;      // this rank has the dataset (else it learned it from workers)
  bool remote_workers = false;  // data workers feed this rank
};

// Everything one rank runs with.
struct RankOptions {
  TrainerConfig trainer;
  uint64_t steps_per_epoch = 0;  // whole global batches per pass over the dataset
  int torch_threads = 1;         // LibTorch's intra-op threads
  int local_threads = 0;         // this rank's own preprocessing threads
};

// Derives the rank's options once the dataset is known: --epochs becomes steps (as the
// sampler cuts epochs: whole global batches), and the host's cores are split between
// LibTorch and local preprocessing (ranks on one host share its cores). Logs the epoch
// arithmetic on rank 0. Throws ConfigError when --epochs is given and the dataset holds
// less than one global batch.
RankOptions derive_rank_options(const TrainerOptions& opts, const data::DatasetInfo& info, const DistInfo& dist,
                                const RankHost& host);

}  // namespace tandem::training
