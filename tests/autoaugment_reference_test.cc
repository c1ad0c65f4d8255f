// The AutoAugment family and RandomErasing against torchvision 0.14 (Debian's), on the
// reference images of tests/fixtures/transform_reference.json (bench/make_transform_reference.py):
// every operation at fixed magnitudes, and each policy with the draws torchvision made
// forced on both sides, so the policy's path (its operation order, magnitude tables, signs,
// AugMix's mixing) is compared image for image.
//
// Tolerances, as in transform_reference_test.cc: operations that only move or map values
// (posterize, solarize, equalize, invert, erase) must be exact; float32 arithmetic then a
// rounding or truncation (colour blends, sharpness, autocontrast, bilinear sampling, AugMix's
// mix) may differ by 1 level on up to 5% of values; nearest-neighbour sampling may pick the
// other neighbour on a tie: 2% of values.
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/data/augment/autoaugment.h"
#include "tandem/data/augment/erasing.h"
#include "transform_reference.h"

namespace tandem::data {
namespace {

AugOp op_named(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(AugOp::kInvert); ++i)
    if (name == aug_op_name(static_cast<AugOp>(i))) return static_cast<AugOp>(i);
  ADD_FAILURE() << "no operation " << name;
  return AugOp::kIdentity;
}

bool geometric(AugOp op) {
  return op == AugOp::kShearX || op == AugOp::kShearY || op == AugOp::kTranslateX || op == AugOp::kTranslateY ||
         op == AugOp::kRotate;
}

Tolerance tolerance_for(AugOp op, Interpolation mode) {
  if (geometric(op)) return mode == Interpolation::kNearest ? Tolerance{255, 0.02} : Tolerance{1, 0.05};
  if (op == AugOp::kBrightness || op == AugOp::kColor || op == AugOp::kContrast || op == AugOp::kSharpness ||
      op == AugOp::kAutoContrast)
    return {1, 0.05};
  return {0, 0.0};
}

// The loosest tolerance of a sequence of operations.
Tolerance tolerance_for(const std::vector<OpDraw>& ops, Interpolation mode) {
  Tolerance t{0, 0.0};
  for (const OpDraw& d : ops) {
    const Tolerance o = tolerance_for(d.op, mode);
    t = {std::max(t.levels, o.levels), std::max(t.off_fraction, o.off_fraction)};
  }
  return t;
}

struct Ran {
  Image image;
  Tolerance tolerance;
};

Ran run_ops(Image src, const std::vector<OpDraw>& ops, Interpolation mode) {
  Image spare;
  Image *image = &src, *other = &spare;
  apply_ops(ops, mode, image, other);
  return {*image, tolerance_for(ops, mode)};
}

// The operations torchvision applied in a policy case, from the draws it was forced to make.
std::vector<OpDraw> forced_ops(const nlohmann::json& c, const Image& src) {
  const auto& p = c["params"];
  const std::string kind = c["op"];
  std::vector<OpDraw> ops;
  if (kind == "trivial") {
    ops.push_back(op_draw(AugmentPolicy::kTrivialAugmentWide, p["op_index"], p["bin"], p["negate"] == 1, 31,
                          src.height, src.width));
  } else if (kind == "rand") {
    for (const auto& o : p["ops"])
      ops.push_back(op_draw(AugmentPolicy::kRandAugment, o[0], p["magnitude"], o[1] == 1, p["num_magnitude_bins"],
                            src.height, src.width));
  } else if (kind == "auto") {
    const std::string policy = p["policy"];
    const auto dataset = policy == "imagenet"  ? AutoAugmentDataset::kImageNet
                         : policy == "cifar10" ? AutoAugmentDataset::kCifar10
                                               : AutoAugmentDataset::kSvhn;
    const auto sub = auto_augment_sub_policy(dataset, p["sub_policy"]);
    for (int i = 0; i < 2; ++i) {
      if (!(p["probs"][i].get<float>() <= sub[i].probability)) continue;
      ops.push_back(auto_augment_op(sub[i], p["signs"][i] == 0, src.height, src.width));
    }
  }
  return ops;
}

AugMixDraw forced_aug_mix(const nlohmann::json& p, const Image& src) {
  AugMixDraw draw;
  const float m1 = p["m"][1].get<float>();
  draw.original_weight = p["m"][0].get<float>();
  for (const auto& d : p["d"]) draw.chain_weights.push_back(d.get<float>() * m1);
  for (const auto& chain : p["chains"]) {
    auto& ops = draw.chains.emplace_back();
    for (const auto& o : chain) ops.push_back(op_draw(AugmentPolicy::kAugMix, o[0], o[1], o[2] == 1, 10, src.height, src.width));
  }
  return draw;
}

Ran run_case(const nlohmann::json& c) {
  const Image src = input(c["input"]);
  const auto& p = c["params"];
  const std::string kind = c["op"];
  if (kind == "aa_op") {
    const Interpolation mode = p["interpolation"] == "bilinear" ? Interpolation::kBilinear : Interpolation::kNearest;
    return run_ops(src, {{op_named(p["name"]), p["magnitude"].get<double>()}}, mode);
  }
  if (kind == "erase") {
    Image img = src;
    erase(img, {p["top"], p["left"], p["height"], p["width"]}, p["value"].get<uint8_t>());
    return {img, {0, 0.0}};
  }
  if (kind == "augmix") {
    Image img = src;
    apply_aug_mix(forced_aug_mix(p, src), img);
    return {img, {1, 0.05}};
  }
  return run_ops(src, forced_ops(c, src), Interpolation::kNearest);
}

bool is_autoaugment_case(const std::string& op) {
  return op == "aa_op" || op == "trivial" || op == "rand" || op == "auto" || op == "augmix" || op == "erase";
}

TEST(AutoAugmentReference, EveryCaseMatchesTorchvision) {
  std::map<std::string, int> checked;
  for (const auto& c : reference()["cases"]) {
    const std::string op = c["op"];
    if (!is_autoaugment_case(op)) continue;
    const auto shape = c["shape"].get<std::vector<int>>();
    const Ran ran = run_case(c);
    const std::string what = op + " " + c["params"].dump() + " on " + c["input"].get<std::string>();
    ASSERT_EQ(std::vector<int>({ran.image.channels, ran.image.height, ran.image.width}), shape) << what;
    const Difference d = difference(to_chw(ran.image), c);
    EXPECT_LE(d.worst, ran.tolerance.levels) << what;
    EXPECT_LE(d.off_fraction, ran.tolerance.off_fraction) << what;
    ++checked[op];
  }
  EXPECT_GE(checked["aa_op"], 50);
  EXPECT_EQ(checked["trivial"], 10);
  EXPECT_EQ(checked["rand"], 3);
  EXPECT_EQ(checked["auto"], 4);
  EXPECT_EQ(checked["augmix"], 2);
  EXPECT_EQ(checked["erase"], 2);
}

}  // namespace
}  // namespace tandem::data
