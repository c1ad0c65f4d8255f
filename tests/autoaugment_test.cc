// The AutoAugment family's and RandomErasing's draws (what torchvision's forward draws, in
// distribution: tandem's numbers come from the sample's Rng), their --pipeline steps and
// errors, and determinism: the same key gives the same bytes on any thread.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "tandem/common/error.h"
#include "tandem/data/augment/autoaugment.h"
#include "tandem/data/augment/erasing.h"
#include "tandem/data/augment/pipeline.h"

namespace tandem::data {
namespace {

using testing::encode_jpeg;
using testing::gradient_image;

constexpr int kDraws = 14000;

TEST(AutoAugmentDraws, TrivialAugmentWideDrawsEveryOperationEvenlyWithBothSigns) {
  const AutoAugmentOptions o;  // TrivialAugmentWide, 31 bins
  std::map<AugOp, int> count;
  std::map<AugOp, int> negative;
  std::set<double> magnitudes;
  for (int i = 0; i < kDraws; ++i) {
    Rng rng(kAugmentStream, 1, 0, i);
    const auto ops = draw_ops(o, 100, 80, rng);
    ASSERT_EQ(ops.size(), 1u);
    ++count[ops[0].op];
    negative[ops[0].op] += ops[0].magnitude < 0;
    if (ops[0].op == AugOp::kRotate) magnitudes.insert(std::fabs(ops[0].magnitude));
  }
  ASSERT_EQ(count.size(), 14u);  // torchvision's 14, Invert not among them
  EXPECT_EQ(count.count(AugOp::kInvert), 0u);
  for (const auto& [op, n] : count) {
    EXPECT_NEAR(n, kDraws / 14.0, kDraws / 14.0 * 0.15) << aug_op_name(op);
    if (op == AugOp::kShearX || op == AugOp::kRotate || op == AugOp::kBrightness)
      EXPECT_NEAR(negative[op], n / 2.0, n * 0.1) << aug_op_name(op);
  }
  EXPECT_EQ(negative[AugOp::kSolarize] + negative[AugOp::kPosterize], 0);
  EXPECT_EQ(magnitudes.size(), 31u);  // every bin of linspace(0, 135, 31), 0 included
  EXPECT_EQ(*magnitudes.rbegin(), 135.0);
}

TEST(AutoAugmentDraws, RandAugmentUsesTheFixedBinForEveryOperation) {
  AutoAugmentOptions o;
  o.policy = AugmentPolicy::kRandAugment;
  o.num_ops = 3;
  o.magnitude = 30;  // the last bin: each table's top
  std::set<AugOp> seen;
  for (int i = 0; i < 2000; ++i) {
    Rng rng(kAugmentStream, 2, 0, i);
    const auto ops = draw_ops(o, 331, 662, rng);
    ASSERT_EQ(ops.size(), 3u);
    for (const OpDraw& d : ops) {
      seen.insert(d.op);
      if (d.op == AugOp::kRotate) EXPECT_EQ(std::fabs(d.magnitude), 30.0);
      if (d.op == AugOp::kTranslateX) EXPECT_NEAR(std::fabs(d.magnitude), 300.0, 1e-4);  // 150/331 of the width
      if (d.op == AugOp::kTranslateY) EXPECT_NEAR(std::fabs(d.magnitude), 150.0, 1e-4);
      if (d.op == AugOp::kPosterize) EXPECT_EQ(d.magnitude, 4.0);
      if (d.op == AugOp::kSolarize) EXPECT_EQ(d.magnitude, 0.0);
    }
  }
  EXPECT_EQ(seen.size(), 14u);
}

TEST(AutoAugmentDraws, AutoAugmentAppliesEachOperationWithItsProbability) {
  AutoAugmentOptions o;
  o.policy = AugmentPolicy::kAutoAugment;
  o.dataset = AutoAugmentDataset::kSvhn;
  // Over many draws, the mean number of operations is the policies' mean probability sum.
  double expected = 0;
  for (int s = 0; s < kAutoAugmentSubPolicies; ++s)
    for (const SubPolicyOp& op : auto_augment_sub_policy(o.dataset, s)) expected += op.probability;
  expected /= kAutoAugmentSubPolicies;
  size_t applied = 0;
  std::set<AugOp> seen;
  for (int i = 0; i < kDraws; ++i) {
    Rng rng(kAugmentStream, 3, 0, i);
    for (const OpDraw& d : draw_ops(o, 32, 32, rng)) {
      ++applied;
      seen.insert(d.op);
    }
  }
  EXPECT_NEAR(double(applied) / kDraws, expected, 0.03);
  EXPECT_TRUE(seen.count(AugOp::kInvert));  // SVHN's policies invert
  EXPECT_FALSE(seen.count(AugOp::kColor));  // and never use colour
}

TEST(AutoAugmentDraws, AugMixWeightsSumToOneAndChainsFollowTheirDepth) {
  AutoAugmentOptions o;
  o.policy = AugmentPolicy::kAugMix;
  o.severity = 2;
  o.mixture_width = 4;
  std::set<size_t> depths;
  for (int i = 0; i < 500; ++i) {
    Rng rng(kAugmentStream, 4, 0, i);
    const AugMixDraw d = draw_aug_mix(o, 60, 90, rng);
    ASSERT_EQ(d.chain_weights.size(), 4u);
    double sum = d.original_weight;
    for (float w : d.chain_weights) sum += w;
    EXPECT_NEAR(sum, 1.0, 1e-5);
    for (const auto& chain : d.chains) {
      depths.insert(chain.size());
      // Severity 2: bins 0 and 1 of 10, so rotations of 0 or 30/9 degrees.
      for (const OpDraw& op : chain)
        if (op.op == AugOp::kRotate) EXPECT_LE(std::fabs(op.magnitude), 30.0 / 9 + 1e-5);
    }
  }
  EXPECT_EQ(depths, (std::set<size_t>{1, 2, 3}));  // chain_depth -1: 1 to 3
}

TEST(RandomErasing, BoxesFitStrictlyInsideWithTheirAreaAndRatio) {
  const RandomErasingOptions o;
  int drawn = 0;
  for (int i = 0; i < 2000; ++i) {
    Rng rng(kAugmentStream, 5, 0, i);
    const auto box = random_erasing_box(60, 80, o, rng);
    if (!box) continue;
    ++drawn;
    EXPECT_LT(box->height, 60);
    EXPECT_LT(box->width, 80);
    EXPECT_GE(box->top, 0);
    EXPECT_LE(box->top + box->height, 60);
    EXPECT_LE(box->left + box->width, 80);
    const double area = double(box->height) * box->width / (60.0 * 80.0);
    EXPECT_LE(area, 0.33 * 1.3);  // rounding each side to whole pixels
    if (box->width > 4 && box->height > 4) {
      EXPECT_GE(double(box->height) / box->width, 0.3 * 0.7);  // height / width, as torchvision's
      EXPECT_LE(double(box->height) / box->width, 3.3 * 1.3);
    }
  }
  EXPECT_GT(drawn, 1900);
  // The ratio is height / width (torchvision's h = sqrt(area * ratio)): ratios of 2 to 3 stand boxes up.
  for (int i = 0; i < 200; ++i) {
    Rng rng(kAugmentStream, 7, 0, i);
    const auto box = random_erasing_box(60, 80, {1.0, 0.1, 0.3, 2.0, 3.0, 0}, rng);
    ASSERT_TRUE(box.has_value());
    EXPECT_GT(box->height, box->width) << box->height << "x" << box->width;
  }
  // No attempt can fit a box of at least 90% of the area with a ratio of 10 or more.
  Rng rng(1);
  EXPECT_FALSE(random_erasing_box(60, 80, {1.0, 0.9, 1.0, 10.0, 20.0, 0}, rng).has_value());
}

TEST(RandomErasing, ErasesWithProbabilityP) {
  const Image src = gradient_image(40, 50, 3, 1);
  int erased = 0;
  for (int i = 0; i < 1000; ++i) {
    Image img = src;
    Rng rng(kAugmentStream, 6, 0, i);
    random_erasing(img, {0.1, 0.02, 0.33, 0.3, 3.3, 7}, rng);
    erased += img.pixels != src.pixels;
  }
  EXPECT_NEAR(erased, 100, 30);
}

std::string compile_error(const std::string& spec) {
  try {
    Pipeline(parse_pipeline(spec), {true, 3, 0, 0});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(AutoAugmentSteps, ParseWithTorchvisionsDefaults) {
  const PipelineSpec spec =
      parse_pipeline("trivial_augment_wide,rand_augment,auto_augment,aug_mix,random_erasing,auto_augment(policy=svhn)");
  EXPECT_EQ(spec.canonical(),
            "trivial_augment_wide(num_magnitude_bins=31),rand_augment(num_ops=2,magnitude=9,num_magnitude_bins=31),"
            "auto_augment(policy=imagenet),aug_mix(severity=3,mixture_width=3,chain_depth=-1,alpha=1),"
            "random_erasing(p=0.5,scale_min=0.02,scale_max=0.33,ratio_min=0.3,ratio_max=3.3,value=0),"
            "auto_augment(policy=svhn)");
  EXPECT_EQ(parse_pipeline(spec.canonical()).canonical(), spec.canonical());
  const std::string json = R"js(["auto_augment(cifar10)", {"op": "auto_augment", "policy": "cifar10"}])js";
  EXPECT_EQ(parse_pipeline(json).canonical(), "auto_augment(policy=cifar10),auto_augment(policy=cifar10)");
}

TEST(AutoAugmentSteps, BadArgumentsNameTheStepTheArgumentAndTheRange) {
  const std::pair<const char*, const char*> cases[] = {
      {"rand_augment(2, 31)", "'rand_augment(2, 31)': magnitude must be a whole number in [0, 30]"},
      {"rand_augment(num_ops=-1)", "num_ops must be a whole number in [0, 100]"},
      {"trivial_augment_wide(1)", "num_magnitude_bins must be a whole number in [2, 1000]"},
      {"auto_augment(policy=coco)", "policy must be one of imagenet, cifar10, svhn, not 'coco'"},
      {"auto_augment(3)", "policy must be one of imagenet, cifar10, svhn, not '3'"},
      {"aug_mix(severity=11)", "severity must be a whole number in [1, 10]"},
      {"aug_mix(chain_depth=0)", "chain_depth must be -1 (1 to 3 at random) or a whole number in [1, 100]"},
      {"aug_mix(alpha=0)", "alpha must be in (0, 1e6]"},
      {"random_erasing(1.5)", "p must be in [0, 1]"},
      {"random_erasing(scale_max=2)", "need 0 <= scale_min <= scale_max <= 1"},
      {"random_erasing(value=256)", "value must be a whole number in [0, 255]"},
  };
  for (const auto& [spec, message] : cases) {
    const std::string error = compile_error("decode,center_crop(32)," + std::string(spec));
    EXPECT_NE(error.find(message), std::string::npos) << spec << ": " << error;
  }
}

// The recipe on a JPEG for keys 0..n-1, on `threads` threads (each takes every threads-th key).
std::vector<std::vector<uint8_t>> run_keys(const Pipeline& p, const std::vector<uint8_t>& jpeg, int n, int threads) {
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(p.sample_bytes()));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int k = t; k < n; k += threads) {
        Rng rng(kAugmentStream, 9, 0, k);
        p.run_file(jpeg, rng, out[k].data());
      }
    });
  }
  for (auto& th : pool) th.join();
  return out;
}

TEST(AutoAugmentSteps, SameKeySameBytesOnAnyThreadCount) {
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(90, 120, 3, 6));
  for (const char* steps : {"trivial_augment_wide,random_erasing(0.5)", "rand_augment(3,12)", "auto_augment(svhn)",
                            "aug_mix(chain_depth=2)"}) {
    const Pipeline p(parse_pipeline(std::string("decode,random_resized_crop(40),hflip,") + steps), {true, 3, 0, 0});
    const auto one = run_keys(p, jpeg, 48, 1);
    EXPECT_EQ(one, run_keys(p, jpeg, 48, 4)) << steps;
    EXPECT_GT(std::set<std::vector<uint8_t>>(one.begin(), one.end()).size(), 40u) << steps;
  }
}

}  // namespace
}  // namespace tandem::data
