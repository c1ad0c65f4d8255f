#include "tandem/training/trainer_options.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::training {
namespace {

// As the sampler cuts epochs: whole global batches; the remainder waits for the next.
int64_t steps_from_epochs(const TrainerOptions& opts, const data::DatasetInfo& info, const DistInfo& dist,
                          uint64_t& steps_per_epoch) {
  steps_per_epoch = info.size / (static_cast<uint64_t>(opts.batch_size) * static_cast<uint64_t>(dist.world));
  if (opts.epochs <= 0) return opts.steps;
  if (steps_per_epoch == 0) {
    throw ConfigError("--epochs needs at least one global batch per epoch, but dataset " + info.name + " has " +
                      std::to_string(info.size) + " samples for a global batch of " +
                      std::to_string(opts.batch_size * dist.world) + ": lower --batch-size or use --steps");
  }
  const int64_t steps = opts.epochs * static_cast<int64_t>(steps_per_epoch);
  if (dist.rank == 0) {
    spdlog::info("{} of {}: {}", counted(opts.epochs, "epoch"), counted(steps_per_epoch, "step"), counted(steps, "step"));
  }
  return steps;
}

// Threads for LibTorch and for in-process preprocessing, without oversubscribing.
// On GPU the loop needs few CPU threads and the rest preprocess; on CPU training owns
// the cores unless nobody else makes data. Ranks on one host share its cores. A rank
// without the data preprocesses nothing.
void split_cores(const TrainerOptions& opts, const RankHost& host, int local_ranks, RankOptions& out) {
  const int cores = std::max(host.cores / std::max(local_ranks, 1), 1);
  int local = opts.local_workers;
  if (local < 0) {
    if (host.gpus > 0) local = std::max(cores - 2, 1);
    else local = host.remote_workers ? 0 : std::max(cores / 2, 1);
  }
  if (!host.local_data) local = 0;
  out.local_threads = local;
  out.torch_threads = opts.train_threads > 0 ? opts.train_threads : std::max(cores - local, 1);
}

}  // namespace

TrainerConfig trainer_config(const TrainerOptions& opts, int64_t steps) {
  TrainerConfig c;
  c.model = {opts.model, opts.amp, opts.channels_last, opts.grad_sync == "overlap"};
  c.optimizer = {opts.optimizer,      opts.lr,           opts.momentum, opts.weight_decay, opts.fused_optimizer,
                 opts.clip_grad_norm, opts.warmup_steps, opts.schedule, steps};
  c.loop = {steps, opts.log_every, opts.eval_every, opts.emulate_step_ms, opts.batch_size};
  c.checkpoints = {opts.checkpoint_every, opts.keep_checkpoints, opts.resume_any};
  c.mix = {opts.mixup, opts.cutmix, opts.label_smoothing};
  return c;
}

RankOptions derive_rank_options(const TrainerOptions& opts, const data::DatasetInfo& info, const DistInfo& dist,
                                const RankHost& host) {
  RankOptions out;
  const int64_t steps = steps_from_epochs(opts, info, dist, out.steps_per_epoch);
  out.trainer = trainer_config(opts, steps);
  split_cores(opts, host, dist.local_world, out);
  return out;
}

}  // namespace tandem::training
