// TrivialAugmentWide, RandAugment, AutoAugment and AugMix (torchvision.transforms.autoaugment,
// v0.14): the augmentation spaces in torchvision's order, their float32 magnitude tables,
// AutoAugment's learned sub-policies, and the draws each policy makes per image.
#pragma GCC optimize("fp-contract=off")

#include "tandem/data/augment/autoaugment.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string>

namespace tandem::data {
namespace {

// One entry of an _augmentation_space dict: has a magnitude table, is signed.
struct SpaceOp {
  AugOp op;
  bool has_magnitudes;
  bool is_signed;
};

constexpr SpaceOp kTrivialSpace[] = {
    {AugOp::kIdentity, false, false},  {AugOp::kShearX, true, true},     {AugOp::kShearY, true, true},
    {AugOp::kTranslateX, true, true},  {AugOp::kTranslateY, true, true}, {AugOp::kRotate, true, true},
    {AugOp::kBrightness, true, true},  {AugOp::kColor, true, true},      {AugOp::kContrast, true, true},
    {AugOp::kSharpness, true, true},   {AugOp::kPosterize, true, false}, {AugOp::kSolarize, true, false},
    {AugOp::kAutoContrast, false, false}, {AugOp::kEqualize, false, false},
};
// RandAugment's space has TrivialAugmentWide's operations in the same order (other magnitudes).
constexpr SpaceOp kAutoSpace[] = {
    {AugOp::kShearX, true, true},     {AugOp::kShearY, true, true},     {AugOp::kTranslateX, true, true},
    {AugOp::kTranslateY, true, true}, {AugOp::kRotate, true, true},     {AugOp::kBrightness, true, true},
    {AugOp::kColor, true, true},      {AugOp::kContrast, true, true},   {AugOp::kSharpness, true, true},
    {AugOp::kPosterize, true, false}, {AugOp::kSolarize, true, false},  {AugOp::kAutoContrast, false, false},
    {AugOp::kEqualize, false, false}, {AugOp::kInvert, false, false},
};
// AugMix with all_ops=True: the base operations, then the four colour ones.
constexpr SpaceOp kAugMixSpace[] = {
    {AugOp::kShearX, true, true},       {AugOp::kShearY, true, true},     {AugOp::kTranslateX, true, true},
    {AugOp::kTranslateY, true, true},   {AugOp::kRotate, true, true},     {AugOp::kPosterize, true, false},
    {AugOp::kSolarize, true, false},    {AugOp::kAutoContrast, false, false}, {AugOp::kEqualize, false, false},
    {AugOp::kBrightness, true, true},   {AugOp::kColor, true, true},      {AugOp::kContrast, true, true},
    {AugOp::kSharpness, true, true},
};
constexpr int kFixedBins = 10;  // AutoAugment's and AugMix's (_PARAMETER_MAX)

std::span<const SpaceOp> space(AugmentPolicy policy) {
  switch (policy) {
    case AugmentPolicy::kTrivialAugmentWide:
    case AugmentPolicy::kRandAugment: return kTrivialSpace;
    case AugmentPolicy::kAutoAugment: return kAutoSpace;
    case AugmentPolicy::kAugMix: return kAugMixSpace;
  }
  throw std::logic_error("unknown augment policy");
}

// torch.linspace(start, end, steps)[i] in float32, as torch's CPU kernel computes it: from
// the start for the first half, from the end for the second.
float linspace_at(double start_d, double end_d, int steps, int i) {
  const float start = static_cast<float>(start_d), end = static_cast<float>(end_d);
  if (steps == 1) return start;
  const float step = (end - start) / static_cast<float>(steps - 1);
  if (i < steps / 2) return start + step * static_cast<float>(i);
  return end - step * static_cast<float>(steps - i - 1);
}

// The top of a linear magnitude table (torch.linspace(0, top, bins)).
double linear_top(AugmentPolicy policy, AugOp op, int height, int width) {
  const bool trivial = policy == AugmentPolicy::kTrivialAugmentWide;
  switch (op) {
    case AugOp::kShearX:
    case AugOp::kShearY: return trivial ? 0.99 : 0.3;
    case AugOp::kTranslateX:
    case AugOp::kTranslateY: {
      const int size = op == AugOp::kTranslateX ? width : height;
      if (trivial) return 32.0;
      return policy == AugmentPolicy::kAugMix ? size / 3.0 : 150.0 / 331.0 * size;
    }
    case AugOp::kRotate: return trivial ? 135.0 : 30.0;
    default: return trivial ? 0.99 : 0.9;  // brightness, colour, contrast, sharpness
  }
}

// Magnitude bin `bin` of `op`'s table (unsigned).
double magnitude_at(AugmentPolicy policy, AugOp op, int bin, int bins, int height, int width) {
  if (op == AugOp::kPosterize) {  // top - (arange(bins) / ((bins - 1) / k)).round().int()
    const int top = policy == AugmentPolicy::kAugMix ? 4 : 8;
    const double k = policy == AugmentPolicy::kTrivialAugmentWide ? 6.0 : 4.0;
    const float ratio = static_cast<float>(bin) / static_cast<float>((bins - 1) / k);
    return top - static_cast<int>(std::nearbyint(ratio));
  }
  if (op == AugOp::kSolarize) return linspace_at(255.0, 0.0, bins, bin);
  return linspace_at(0.0, linear_top(policy, op, height, width), bins, bin);
}

// AutoAugment's learned policies (torchvision's _get_policies): (operation, probability, bin).
constexpr SubPolicyOp kImageNetPolicy[25][2] = {
    {{AugOp::kPosterize, 0.4, 8}, {AugOp::kRotate, 0.6, 9}},
    {{AugOp::kSolarize, 0.6, 5}, {AugOp::kAutoContrast, 0.6, -1}},
    {{AugOp::kEqualize, 0.8, -1}, {AugOp::kEqualize, 0.6, -1}},
    {{AugOp::kPosterize, 0.6, 7}, {AugOp::kPosterize, 0.6, 6}},
    {{AugOp::kEqualize, 0.4, -1}, {AugOp::kSolarize, 0.2, 4}},
    {{AugOp::kEqualize, 0.4, -1}, {AugOp::kRotate, 0.8, 8}},
    {{AugOp::kSolarize, 0.6, 3}, {AugOp::kEqualize, 0.6, -1}},
    {{AugOp::kPosterize, 0.8, 5}, {AugOp::kEqualize, 1.0, -1}},
    {{AugOp::kRotate, 0.2, 3}, {AugOp::kSolarize, 0.6, 8}},
    {{AugOp::kEqualize, 0.6, -1}, {AugOp::kPosterize, 0.4, 6}},
    {{AugOp::kRotate, 0.8, 8}, {AugOp::kColor, 0.4, 0}},
    {{AugOp::kRotate, 0.4, 9}, {AugOp::kEqualize, 0.6, -1}},
    {{AugOp::kEqualize, 0.0, -1}, {AugOp::kEqualize, 0.8, -1}},
    {{AugOp::kInvert, 0.6, -1}, {AugOp::kEqualize, 1.0, -1}},
    {{AugOp::kColor, 0.6, 4}, {AugOp::kContrast, 1.0, 8}},
    {{AugOp::kRotate, 0.8, 8}, {AugOp::kColor, 1.0, 2}},
    {{AugOp::kColor, 0.8, 8}, {AugOp::kSolarize, 0.8, 7}},
    {{AugOp::kSharpness, 0.4, 7}, {AugOp::kInvert, 0.6, -1}},
    {{AugOp::kShearX, 0.6, 5}, {AugOp::kEqualize, 1.0, -1}},
    {{AugOp::kColor, 0.4, 0}, {AugOp::kEqualize, 0.6, -1}},
    {{AugOp::kEqualize, 0.4, -1}, {AugOp::kSolarize, 0.2, 4}},
    {{AugOp::kSolarize, 0.6, 5}, {AugOp::kAutoContrast, 0.6, -1}},
    {{AugOp::kInvert, 0.6, -1}, {AugOp::kEqualize, 1.0, -1}},
    {{AugOp::kColor, 0.6, 4}, {AugOp::kContrast, 1.0, 8}},
    {{AugOp::kEqualize, 0.8, -1}, {AugOp::kEqualize, 0.6, -1}},
};
constexpr SubPolicyOp kCifar10Policy[25][2] = {
    {{AugOp::kInvert, 0.1, -1}, {AugOp::kContrast, 0.2, 6}},
    {{AugOp::kRotate, 0.7, 2}, {AugOp::kTranslateX, 0.3, 9}},
    {{AugOp::kSharpness, 0.8, 1}, {AugOp::kSharpness, 0.9, 3}},
    {{AugOp::kShearY, 0.5, 8}, {AugOp::kTranslateY, 0.7, 9}},
    {{AugOp::kAutoContrast, 0.5, -1}, {AugOp::kEqualize, 0.9, -1}},
    {{AugOp::kShearY, 0.2, 7}, {AugOp::kPosterize, 0.3, 7}},
    {{AugOp::kColor, 0.4, 3}, {AugOp::kBrightness, 0.6, 7}},
    {{AugOp::kSharpness, 0.3, 9}, {AugOp::kBrightness, 0.7, 9}},
    {{AugOp::kEqualize, 0.6, -1}, {AugOp::kEqualize, 0.5, -1}},
    {{AugOp::kContrast, 0.6, 7}, {AugOp::kSharpness, 0.6, 5}},
    {{AugOp::kColor, 0.7, 7}, {AugOp::kTranslateX, 0.5, 8}},
    {{AugOp::kEqualize, 0.3, -1}, {AugOp::kAutoContrast, 0.4, -1}},
    {{AugOp::kTranslateY, 0.4, 3}, {AugOp::kSharpness, 0.2, 6}},
    {{AugOp::kBrightness, 0.9, 6}, {AugOp::kColor, 0.2, 8}},
    {{AugOp::kSolarize, 0.5, 2}, {AugOp::kInvert, 0.0, -1}},
    {{AugOp::kEqualize, 0.2, -1}, {AugOp::kAutoContrast, 0.6, -1}},
    {{AugOp::kEqualize, 0.2, -1}, {AugOp::kEqualize, 0.6, -1}},
    {{AugOp::kColor, 0.9, 9}, {AugOp::kEqualize, 0.6, -1}},
    {{AugOp::kAutoContrast, 0.8, -1}, {AugOp::kSolarize, 0.2, 8}},
    {{AugOp::kBrightness, 0.1, 3}, {AugOp::kColor, 0.7, 0}},
    {{AugOp::kSolarize, 0.4, 5}, {AugOp::kAutoContrast, 0.9, -1}},
    {{AugOp::kTranslateY, 0.9, 9}, {AugOp::kTranslateY, 0.7, 9}},
    {{AugOp::kAutoContrast, 0.9, -1}, {AugOp::kSolarize, 0.8, 3}},
    {{AugOp::kEqualize, 0.8, -1}, {AugOp::kInvert, 0.1, -1}},
    {{AugOp::kTranslateY, 0.7, 9}, {AugOp::kAutoContrast, 0.9, -1}},
};
constexpr SubPolicyOp kSvhnPolicy[25][2] = {
    {{AugOp::kShearX, 0.9, 4}, {AugOp::kInvert, 0.2, -1}},
    {{AugOp::kShearY, 0.9, 8}, {AugOp::kInvert, 0.7, -1}},
    {{AugOp::kEqualize, 0.6, -1}, {AugOp::kSolarize, 0.6, 6}},
    {{AugOp::kInvert, 0.9, -1}, {AugOp::kEqualize, 0.6, -1}},
    {{AugOp::kEqualize, 0.6, -1}, {AugOp::kRotate, 0.9, 3}},
    {{AugOp::kShearX, 0.9, 4}, {AugOp::kAutoContrast, 0.8, -1}},
    {{AugOp::kShearY, 0.9, 8}, {AugOp::kInvert, 0.4, -1}},
    {{AugOp::kShearY, 0.9, 5}, {AugOp::kSolarize, 0.2, 6}},
    {{AugOp::kInvert, 0.9, -1}, {AugOp::kAutoContrast, 0.8, -1}},
    {{AugOp::kEqualize, 0.6, -1}, {AugOp::kRotate, 0.9, 3}},
    {{AugOp::kShearX, 0.9, 4}, {AugOp::kSolarize, 0.3, 3}},
    {{AugOp::kShearY, 0.8, 8}, {AugOp::kInvert, 0.7, -1}},
    {{AugOp::kEqualize, 0.9, -1}, {AugOp::kTranslateY, 0.6, 6}},
    {{AugOp::kInvert, 0.9, -1}, {AugOp::kEqualize, 0.6, -1}},
    {{AugOp::kContrast, 0.3, 3}, {AugOp::kRotate, 0.8, 4}},
    {{AugOp::kInvert, 0.8, -1}, {AugOp::kTranslateY, 0.0, 2}},
    {{AugOp::kShearY, 0.7, 6}, {AugOp::kSolarize, 0.4, 8}},
    {{AugOp::kInvert, 0.6, -1}, {AugOp::kRotate, 0.8, 4}},
    {{AugOp::kShearY, 0.3, 7}, {AugOp::kTranslateX, 0.9, 3}},
    {{AugOp::kShearX, 0.1, 6}, {AugOp::kInvert, 0.6, -1}},
    {{AugOp::kSolarize, 0.7, 2}, {AugOp::kTranslateY, 0.6, 7}},
    {{AugOp::kShearY, 0.8, 4}, {AugOp::kInvert, 0.8, -1}},
    {{AugOp::kShearX, 0.7, 9}, {AugOp::kTranslateY, 0.8, 3}},
    {{AugOp::kShearY, 0.8, 5}, {AugOp::kAutoContrast, 0.7, -1}},
    {{AugOp::kShearX, 0.7, 2}, {AugOp::kInvert, 0.1, -1}},
};

OpDraw make_draw(AugmentPolicy policy, const SpaceOp& entry, int bin, bool negate, int bins, int height, int width) {
  OpDraw draw{entry.op, 0.0};
  if (entry.has_magnitudes) draw.magnitude = magnitude_at(policy, entry.op, bin, bins, height, width);
  if (entry.is_signed && negate) draw.magnitude *= -1.0;
  return draw;
}

const SpaceOp& find_entry(AugmentPolicy policy, AugOp op) {
  for (const SpaceOp& entry : space(policy))
    if (entry.op == op) return entry;
  throw std::logic_error(std::string("no ") + aug_op_name(op) + " in this augmentation space");
}

// TrivialAugmentWide.forward: one operation, one random bin, a random sign.
OpDraw draw_trivial(const AutoAugmentOptions& o, int height, int width, Rng& rng) {
  const SpaceOp& entry = kTrivialSpace[rng.below(std::size(kTrivialSpace))];
  const int bin = entry.has_magnitudes ? static_cast<int>(rng.below(o.num_magnitude_bins)) : 0;
  const bool negate = entry.is_signed && rng.below(2) == 1;
  return make_draw(AugmentPolicy::kTrivialAugmentWide, entry, bin, negate, o.num_magnitude_bins, height, width);
}

// RandAugment.forward: num_ops operations, each at the fixed magnitude bin, a random sign.
std::vector<OpDraw> draw_rand(const AutoAugmentOptions& o, int height, int width, Rng& rng) {
  std::vector<OpDraw> ops;
  for (int i = 0; i < o.num_ops; ++i) {
    const SpaceOp& entry = kTrivialSpace[rng.below(std::size(kTrivialSpace))];
    const bool negate = entry.is_signed && rng.below(2) == 1;
    ops.push_back(make_draw(AugmentPolicy::kRandAugment, entry, o.magnitude, negate, o.num_magnitude_bins, height, width));
  }
  return ops;
}

// AutoAugment.forward: a random sub-policy; each of its two operations with its probability.
std::vector<OpDraw> draw_auto(const AutoAugmentOptions& o, int height, int width, Rng& rng) {
  const auto sub = auto_augment_sub_policy(o.dataset, static_cast<int>(rng.below(kAutoAugmentSubPolicies)));
  const double probs[2] = {rng.uniform(), rng.uniform()};
  const bool negate[2] = {rng.below(2) == 0, rng.below(2) == 0};  // torch negates when signs[i] == 0
  std::vector<OpDraw> ops;
  for (int i = 0; i < 2; ++i) {
    if (!(probs[i] < sub[i].probability)) continue;
    ops.push_back(auto_augment_op(sub[i], negate[i], height, width));
  }
  return ops;
}

// A Dirichlet(alpha, ..., alpha) draw of `k` weights (normalised gamma draws), float32 as torch's.
std::vector<float> sample_dirichlet(Rng& rng, double alpha, int k) {
  std::vector<double> g(k);
  double sum = 0;
  for (double& v : g) sum += v = sample_gamma(rng, alpha);
  std::vector<float> w(k);
  if (sum == 0) {  // every draw underflowed (a tiny alpha): all weight on one
    w[rng.below(k)] = 1.0f;
    return w;
  }
  for (int i = 0; i < k; ++i) w[i] = static_cast<float>(g[i] / sum);
  return w;
}

}  // namespace

std::span<const SubPolicyOp> auto_augment_sub_policy(AutoAugmentDataset dataset, int index) {
  switch (dataset) {
    case AutoAugmentDataset::kImageNet: return kImageNetPolicy[index];
    case AutoAugmentDataset::kCifar10: return kCifar10Policy[index];
    case AutoAugmentDataset::kSvhn: return kSvhnPolicy[index];
  }
  throw std::logic_error("unknown AutoAugment dataset");
}

OpDraw auto_augment_op(const SubPolicyOp& op, bool negate, int height, int width) {
  const SpaceOp& entry = find_entry(AugmentPolicy::kAutoAugment, op.op);
  return make_draw(AugmentPolicy::kAutoAugment, entry, std::max(op.bin, 0), negate, kFixedBins, height, width);
}

std::vector<OpDraw> draw_ops(const AutoAugmentOptions& o, int height, int width, Rng& rng) {
  switch (o.policy) {
    case AugmentPolicy::kTrivialAugmentWide: return {draw_trivial(o, height, width, rng)};
    case AugmentPolicy::kRandAugment: return draw_rand(o, height, width, rng);
    case AugmentPolicy::kAutoAugment: return draw_auto(o, height, width, rng);
    case AugmentPolicy::kAugMix: break;
  }
  throw std::logic_error("draw_ops: AugMix draws with draw_aug_mix");
}

void apply_ops(std::span<const OpDraw> ops, Interpolation mode, Image*& image, Image*& spare) {
  for (const OpDraw& d : ops) apply_op(d.op, d.magnitude, mode, image, spare);
}

AugMixDraw draw_aug_mix(const AutoAugmentOptions& o, int height, int width, Rng& rng) {
  AugMixDraw draw;
  const std::vector<float> m = sample_dirichlet(rng, o.alpha, 2);
  draw.original_weight = m[0];
  draw.chain_weights = sample_dirichlet(rng, o.alpha, o.mixture_width);
  for (float& w : draw.chain_weights) w *= m[1];
  for (int i = 0; i < o.mixture_width; ++i) {
    const int depth = o.chain_depth > 0 ? o.chain_depth : 1 + static_cast<int>(rng.below(3));
    std::vector<OpDraw>& chain = draw.chains.emplace_back();
    for (int j = 0; j < depth; ++j) {
      const SpaceOp& entry = kAugMixSpace[rng.below(std::size(kAugMixSpace))];
      const int bin = entry.has_magnitudes ? static_cast<int>(rng.below(o.severity)) : 0;
      const bool negate = entry.is_signed && rng.below(2) == 1;
      chain.push_back(make_draw(AugmentPolicy::kAugMix, entry, bin, negate, kFixedBins, height, width));
    }
  }
  return draw;
}

void apply_aug_mix(const AugMixDraw& draw, Image& image) {
  const size_t n = image.bytes();
  thread_local std::vector<float> mix;
  thread_local Image chain, spare;
  mix.resize(n);
  for (size_t i = 0; i < n; ++i) mix[i] = draw.original_weight * static_cast<float>(image.pixels[i]);
  for (size_t c = 0; c < draw.chains.size(); ++c) {
    chain.reshape(image.height, image.width, image.channels);
    std::copy_n(image.pixels.begin(), n, chain.pixels.begin());
    Image *a = &chain, *b = &spare;
    apply_ops(draw.chains[c], Interpolation::kBilinear, a, b);
    const float w = draw.chain_weights[c];
    for (size_t i = 0; i < n; ++i) mix[i] += w * static_cast<float>(a->pixels[i]);
  }
  for (size_t i = 0; i < n; ++i) image.pixels[i] = static_cast<uint8_t>(std::clamp(mix[i], 0.0f, 255.0f));
}

void auto_augment(const AutoAugmentOptions& o, Image*& image, Image*& spare, Rng& rng) {
  if (o.policy == AugmentPolicy::kAugMix) return apply_aug_mix(draw_aug_mix(o, image->height, image->width, rng), *image);
  const std::vector<OpDraw> ops = draw_ops(o, image->height, image->width, rng);
  apply_ops(ops, Interpolation::kNearest, image, spare);
}

int augmentation_space_size(AugmentPolicy policy) { return static_cast<int>(space(policy).size()); }

OpDraw op_draw(AugmentPolicy policy, int op_index, int bin, bool negate, int num_bins, int height, int width) {
  if (policy == AugmentPolicy::kAutoAugment || policy == AugmentPolicy::kAugMix) num_bins = kFixedBins;
  return make_draw(policy, space(policy)[op_index], bin, negate, num_bins, height, width);
}

}  // namespace tandem::data
