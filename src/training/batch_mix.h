// Batch-level mixing and label smoothing (Torch world only), as torchvision's
// classification reference does them: RandomMixup and RandomCutmix (p=1) under
// RandomChoice, and CrossEntropyLoss(label_smoothing). Applied on the trainer's device to
// each batch after normalisation, they turn a batch's labels into soft targets: float32
// [N, classes], each row summing to 1, which Model::loss receives in place of the int64
// labels. Every draw comes from (seed, step, rank) alone (data::Rng, kMixStream): a run
// resumed from a checkpoint mixes its batches as the uninterrupted run did, and each rank
// mixes its own batch with its own draws (as the reference does per process).
#pragma once

#include <cstdint>
#include <string>

#include <torch/types.h>

#include "model.h"
#include "tandem/training/trainer_options.h"

namespace tandem::training {

// What one batch's mixing drew.
struct MixDraw {
  enum class Kind { kNone, kMixup, kCutmix };
  Kind kind = Kind::kNone;
  // The weight of each sample's own label; (1 - lam) goes to its neighbour's (the batch
  // rolled by one). For CutMix, the share of the image's area that stays its own.
  double lam = 1;
  // CutMix: the box pasted from the rolled batch, rows [y0, y1) and columns [x0, x1).
  int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
  bool operator==(const MixDraw&) const = default;
};

// The draw for the batch of `step` on `rank`, images `height` x `width`: none without
// --mixup and --cutmix; with both, either with probability 0.5. lam ~ Beta(alpha, alpha);
// CutMix centres a box of sides sqrt(1 - lam) x (width, height) uniformly, clips it to the
// image and recomputes lam from the clipped box's area.
MixDraw draw_mix(const MixOptions& o, int64_t step, int rank, int64_t height, int64_t width);

// lam x onehot(labels) + (1 - lam) x onehot(labels rolled by one), then smoothed as
// torch's cross_entropy does: (1 - smoothing) x t + smoothing / classes. float32
// [N, classes] on the labels' device. REQUIRES: labels int64 [N] in [0, classes).
torch::Tensor soft_targets(const torch::Tensor& labels, int64_t classes, double lam, double smoothing);

// `x` ([N, ...]; [N, C, H, W] for CutMix) mixed with itself rolled by one as `draw` says,
// in x's dtype and memory format; `x` itself is left as it was.
torch::Tensor mix_images(const torch::Tensor& x, const MixDraw& draw);

struct MixedBatch {
  torch::Tensor x;        // the images the model sees
  torch::Tensor targets;  // soft targets, float32 [N, classes]
};

// The batch of `step` on `rank` as the model trains on it. REQUIRES: o.soft_targets().
MixedBatch mix_batch(const torch::Tensor& x, const torch::Tensor& labels, const MixOptions& o, int64_t step,
                     int rank, int64_t classes);

// Throws ConfigError, once at start, when the flags cannot apply: a training_step model
// (out of scope: it sees fields, not images and labels), --cutmix on samples that are not
// [C, H, W] images, or a TorchScript loss that cannot take soft targets. `model_name` is
// --model, for the messages.
void check_mixing(const MixOptions& o, Model& model, const data::DatasetInfo& info, const std::string& model_name);

}  // namespace tandem::training
