// The AutoAugment family of policies with torchvision's semantics (v0.14, tensor path):
// TrivialAugmentWide, RandAugment, AutoAugment and AugMix. Each draws its operations from
// the caller's Rng (the sample's stream, so the result is a function of the key) and then
// applies them; the draw and the application are separate functions, so a test can force
// the operations torchvision drew and compare the images.
#pragma once

#include <span>
#include <vector>

#include "tandem/data/augment/autoaugment_ops.h"
#include "tandem/data/codecs/image.h"
#include "tandem/data/core/rng.h"

namespace tandem::data {

enum class AugmentPolicy { kTrivialAugmentWide, kRandAugment, kAutoAugment, kAugMix };

// AutoAugment's learned policies (AutoAugmentPolicy).
enum class AutoAugmentDataset { kImageNet, kCifar10, kSvhn };

// One policy and its parameters (torchvision's defaults). Interpolation is torchvision's
// default for each: nearest, bilinear for AugMix; fill is None (zeros).
struct AutoAugmentOptions {
  AugmentPolicy policy = AugmentPolicy::kTrivialAugmentWide;
  int num_magnitude_bins = 31;  // TrivialAugmentWide, RandAugment
  int num_ops = 2, magnitude = 9;  // RandAugment
  AutoAugmentDataset dataset = AutoAugmentDataset::kImageNet;  // AutoAugment
  int severity = 3, mixture_width = 3, chain_depth = -1;  // AugMix; chain_depth <= 0: 1 to 3 at random
  double alpha = 1.0;                                      // AugMix
};

// One operation as _apply_op receives it.
struct OpDraw {
  AugOp op = AugOp::kIdentity;
  double magnitude = 0;
};

// The operation at `op_index` of `policy`'s augmentation space (the order of torchvision's
// _augmentation_space dict) with the magnitude of bin `bin` of `num_bins` (ignored for
// operations without magnitudes; for an image of height x width), negated when `negate`
// and the operation is signed. AutoAugment and AugMix use 10 bins whatever num_bins says.
// REQUIRES: 0 <= op_index < augmentation_space_size(policy), 0 <= bin < num_bins.
OpDraw op_draw(AugmentPolicy policy, int op_index, int bin, bool negate, int num_bins, int height, int width);
int augmentation_space_size(AugmentPolicy policy);

// AutoAugment's sub-policy `index` of `dataset`: two (operation, probability, magnitude bin)
// entries; bin -1 when the operation takes none.
struct SubPolicyOp {
  AugOp op;
  double probability;
  int bin;
};
std::span<const SubPolicyOp> auto_augment_sub_policy(AutoAugmentDataset dataset, int index);
inline constexpr int kAutoAugmentSubPolicies = 25;

// A sub-policy's operation with its magnitude (its bin of 10), negated when `negate` and signed.
OpDraw auto_augment_op(const SubPolicyOp& op, bool negate, int height, int width);

// The operations TrivialAugmentWide, RandAugment or AutoAugment apply to an image of
// height x width, drawn from `rng` as torchvision draws them (the same distributions).
std::vector<OpDraw> draw_ops(const AutoAugmentOptions& options, int height, int width, Rng& rng);

// Applies `ops` in order with the policy's interpolation.
void apply_ops(std::span<const OpDraw> ops, Interpolation mode, Image*& image, Image*& spare);

// AugMix's draw: the original's weight m0, each chain's weight (float32, as torch multiplies
// the Dirichlet draws) and each chain's operations.
struct AugMixDraw {
  float original_weight = 0;
  std::vector<float> chain_weights;
  std::vector<std::vector<OpDraw>> chains;
};
AugMixDraw draw_aug_mix(const AutoAugmentOptions& options, int height, int width, Rng& rng);

// m0 * image + sum(w_i * chain_i(image)) in float32, truncated to uint8; chains bilinear.
void apply_aug_mix(const AugMixDraw& draw, Image& image);

// Draws with `rng` and applies `options`' policy to *image (through *spare).
void auto_augment(const AutoAugmentOptions& options, Image*& image, Image*& spare, Rng& rng);

}  // namespace tandem::data
