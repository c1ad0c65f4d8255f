// Batch-level mixing and label smoothing in the trainer (--mixup, --cutmix,
// --label-smoothing): the draws and soft targets themselves, and the trainer on one rank
// with each (finite losses, a resume that mixes as the uninterrupted run did, clear errors
// where they cannot apply). (Torch world: includes the training module's private headers.)
#include <cmath>
#include <filesystem>
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/api/module.h>
#include <torch/torch.h>

#include "image_fixtures.h"
#include "process_helpers.h"
#include "shard_fixtures.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/core/options.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/training/trainer.h"
#include "training/batch_mix.h"

namespace tandem::training {
namespace {

namespace fs = std::filesystem;
using Kind = MixDraw::Kind;

MixOptions mixing(double mixup, double cutmix, double smoothing = 0, uint64_t seed = 7) {
  return MixOptions{mixup, cutmix, smoothing, seed};
}

TEST(SoftTargets, SumToOnePerSampleAndSmoothAsTorchsCrossEntropyDoes) {
  const torch::Tensor labels = torch::tensor({0, 2, 2, 1}, torch::kInt64);
  const torch::Tensor t = soft_targets(labels, 4, 0.7, 0.1);
  ASSERT_EQ(t.sizes(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(t.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::allclose(t.sum(1), torch::ones({4}))) << t;
  // Sample 0 is label 0; its neighbour (the batch rolled by one) is the last, label 1.
  EXPECT_NEAR(t[0][0].item<float>(), 0.7 * 0.9 + 0.025, 1e-6);
  EXPECT_NEAR(t[0][1].item<float>(), 0.3 * 0.9 + 0.025, 1e-6);
  EXPECT_NEAR(t[0][3].item<float>(), 0.025, 1e-6);
  EXPECT_NEAR(t[2][2].item<float>(), 0.9 + 0.025, 1e-6) << "its own label and its neighbour's are both 2";
  const torch::Tensor onehot = torch::nn::functional::one_hot(labels, 4).to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(soft_targets(labels, 4, 1.0, 0), onehot));
  torch::manual_seed(3);
  const torch::Tensor outputs = torch::randn({4, 4});
  const torch::Tensor smoothed = torch::nn::functional::cross_entropy(
      outputs, labels, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.1));
  EXPECT_TRUE(
      torch::allclose(torch::nn::functional::cross_entropy(outputs, soft_targets(labels, 4, 1.0, 0.1)), smoothed));
}

TEST(MixDraws, TheSameSeedStepAndRankGiveTheSameDrawAndBothKindsComeUpAboutEvenly) {
  const MixOptions both = mixing(0.2, 1.0);
  int cutmix = 0;
  bool differs_by_step = false, differs_by_rank = false, differs_by_seed = false;
  for (int64_t step = 0; step < 400; ++step) {
    const MixDraw d = draw_mix(both, step, 0, 32, 24);
    EXPECT_EQ(d, draw_mix(both, step, 0, 32, 24)) << "step " << step;
    ASSERT_NE(d.kind, Kind::kNone);
    EXPECT_GE(d.lam, 0.0);
    EXPECT_LE(d.lam, 1.0);
    cutmix += d.kind == Kind::kCutmix;
    differs_by_step = differs_by_step || !(d == draw_mix(both, step + 1, 0, 32, 24));
    differs_by_rank = differs_by_rank || !(d == draw_mix(both, step, 1, 32, 24));
    differs_by_seed = differs_by_seed || !(d == draw_mix(mixing(0.2, 1.0, 0, 8), step, 0, 32, 24));
  }
  EXPECT_GT(cutmix, 150) << "one of the two per batch, each with probability 0.5";
  EXPECT_LT(cutmix, 250);
  EXPECT_TRUE(differs_by_step && differs_by_rank && differs_by_seed);
  EXPECT_EQ(draw_mix(mixing(0.2, 0), 5, 0, 8, 8).kind, Kind::kMixup);
  EXPECT_EQ(draw_mix(mixing(0, 1.0), 5, 0, 8, 8).kind, Kind::kCutmix);
  EXPECT_EQ(draw_mix(mixing(0, 0, 0.1), 5, 0, 8, 8), MixDraw{}) << "smoothing alone mixes nothing";
}

// Sample i of the batch is filled with the value i + 1, so a pixel tells where it came from.
torch::Tensor numbered_batch(int64_t n, int64_t height, int64_t width) {
  return torch::arange(1, n + 1, torch::kFloat32).view({n, 1, 1, 1}).expand({n, 3, height, width}).contiguous();
}

TEST(MixDraws, CutmixPastesItsBoxFromTheNeighbourAndLamIsTheShareOfTheAreaLeft) {
  const int64_t h = 20, w = 28;
  const torch::Tensor x = numbered_batch(4, h, w);
  for (int64_t step = 0; step < 100; ++step) {
    const MixDraw d = draw_mix(mixing(0, 1.0), step, 0, h, w);
    ASSERT_EQ(d.kind, Kind::kCutmix);
    ASSERT_TRUE(0 <= d.y0 && d.y0 <= d.y1 && d.y1 <= h && 0 <= d.x0 && d.x0 <= d.x1 && d.x1 <= w) << "step " << step;
    EXPECT_DOUBLE_EQ(d.lam, 1.0 - static_cast<double>((d.y1 - d.y0) * (d.x1 - d.x0)) / (h * w)) << "step " << step;
    const torch::Tensor out = mix_images(x, d);
    for (int64_t i = 0; i < 4; ++i) {
      const double own = out[i].eq(static_cast<float>(i + 1)).to(torch::kFloat64).mean().item<double>();
      const double neighbour = out[i].eq(static_cast<float>((i + 3) % 4 + 1)).to(torch::kFloat64).mean().item<double>();
      EXPECT_NEAR(own, d.lam, 1e-12) << "step " << step << ", sample " << i;
      EXPECT_NEAR(neighbour, 1.0 - d.lam, 1e-12) << "step " << step << ", sample " << i;
    }
  }
  EXPECT_TRUE(torch::equal(x, numbered_batch(4, h, w))) << "the batch itself is left as it was";
}

TEST(MixDraws, MixupWeighsImagesAndTargetsWithTheSameLam) {
  const torch::Tensor x = numbered_batch(3, 4, 4).contiguous(torch::MemoryFormat::ChannelsLast);
  const torch::Tensor labels = torch::tensor({0, 1, 2}, torch::kInt64);
  const MixedBatch m = mix_batch(x, labels, mixing(0.4, 0), 11, 0, 3);
  const double lam = draw_mix(mixing(0.4, 0), 11, 0, 4, 4).lam;
  ASSERT_GT(lam, 0.0);
  ASSERT_LT(lam, 1.0);
  EXPECT_NEAR(m.x[0][0][0][0].item<float>(), lam * 1 + (1 - lam) * 3, 1e-5);
  EXPECT_NEAR(m.x[1][2][3][3].item<float>(), lam * 2 + (1 - lam) * 1, 1e-5);
  EXPECT_TRUE(m.x.is_contiguous(torch::MemoryFormat::ChannelsLast)) << "the layout the model expects";
  EXPECT_NEAR(m.targets[0][0].item<float>(), lam, 1e-6);
  EXPECT_NEAR(m.targets[0][2].item<float>(), 1 - lam, 1e-6);
  EXPECT_TRUE(torch::allclose(m.targets.sum(1), torch::ones({3})));
}

// The synthetic dataset's batches of 8 16 x 16 images, batch k holding samples 8k to 8k+7.
struct Batches {
  std::shared_ptr<const data::Dataset> dataset = [] {
    DataOptions o;
    o.data = "synthetic";
    o.image_size = 16;
    o.dataset_size = 4096;
    return std::shared_ptr<const data::Dataset>(data::make_dataset(o));
  }();
  const data::DatasetInfo& info() const { return dataset->info(); }
  NextBatch from(uint64_t first) const {
    auto maker = std::make_shared<data::BatchMaker>(dataset, nullptr);
    auto next = std::make_shared<uint64_t>(first);
    return [maker, next]() -> std::optional<data::Batch> {
      data::BatchRequest r{*next, 0, {}};
      for (uint64_t i = 0; i < 8; ++i) r.indices.push_back(*next * 8 + i);
      ++*next;
      return maker->make(r);
    };
  }
};

TrainerConfig small_run(const MixOptions& mix, int64_t steps) {
  TrainerConfig c;
  c.optimizer.steps = c.loop.steps = steps;
  c.optimizer.lr = 0.02;
  c.loop.log_every = steps;
  c.mix = mix;
  return c;
}

std::vector<double> losses_of(const TrainerConfig& config, const Batches& data) {
  return Trainer(config, data.info(), DistInfo{}, RunPaths{}).run(data.from(0), std::atomic<bool>(false)).losses;
}

TEST(MixingTrainer, EachMixingGivesFiniteLossesOfItsOwn) {
  const Batches data;
  const std::vector<double> plain = losses_of(small_run({}, 6), data);
  ASSERT_EQ(plain.size(), 6u);
  for (const MixOptions& mix : {mixing(0.2, 0), mixing(0, 1.0), mixing(0.2, 1.0), mixing(0, 0, 0.1)}) {
    SCOPED_TRACE(::testing::Message() << "mixup " << mix.mixup << " cutmix " << mix.cutmix << " smoothing "
                                    << mix.label_smoothing);
    const std::vector<double> losses = losses_of(small_run(mix, 6), data);
    ASSERT_EQ(losses.size(), 6u);
    for (const double l : losses) EXPECT_TRUE(std::isfinite(l)) << l;
    EXPECT_NE(losses[0], plain[0]) << "the same model and batch: the first loss differs only by the mixing";
  }
}

// A run stopped at a checkpoint and resumed draws each later batch's mixing from its step,
// as the uninterrupted run did: the losses after the checkpoint are equal, bit for bit.
TEST(MixingTrainer, ACheckpointResumesWithTheSameMixingAndLosses) {
  const Batches data;
  TrainerConfig config = small_run(mixing(0.2, 1.0, 0.1), 10);
  config.checkpoints.every = 5;
  const std::vector<double> whole = losses_of(config, data);
  const RunPaths paths{(testing::fresh_dir("mixing-checkpoints") / "checkpoints").string(), ""};
  Trainer(config, data.info(), DistInfo{}, paths).run(data.from(0), std::atomic<bool>(false), {5});
  Trainer resumed(config, data.info(), DistInfo{}, paths);
  ASSERT_EQ(resumed.start_step(), 5);
  const TrainReport rest = resumed.run(data.from(5), std::atomic<bool>(false));
  ASSERT_EQ(whole.size(), 10u);
  ASSERT_EQ(rest.losses.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(rest.losses[i], whole[5 + i]) << "step " << 5 + i;
  config.mix.seed = 8;
  EXPECT_NE(losses_of(config, data)[0], whole[0]) << "the seed chooses the draws";
}

std::string config_error(const TrainerConfig& config, const data::DatasetInfo& info) {
  try {
    Trainer(config, info, DistInfo{}, RunPaths{});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MixingTrainer, WhereMixingCannotApplyTheRunStopsAtStartSayingWhy) {
  const Batches data;
  TrainerConfig config = small_run(mixing(0, 0, 0.1), 1);
  config.model.name = TANDEM_FIXTURES "/models/hard_label_loss.pt";
  const std::string hard = config_error(config, data.info());
  EXPECT_NE(hard.find("hard_label_loss.pt's loss(outputs, labels) fails on outputs [2, 10] and soft targets float32 "
                      "[2, 10]"),
            std::string::npos)
      << hard;
  EXPECT_NE(hard.find("make it accept them"), std::string::npos) << hard;
  config.model.name = TANDEM_FIXTURES "/models/tiny_net.pt";
  EXPECT_EQ(config_error(config, data.info()), "(no error)") << "F.cross_entropy takes soft targets";

  torch::jit::Module m("__torch__.Step");
  m.register_parameter("w", torch::ones({1}).requires_grad_(), /*is_buffer=*/false);
  m.define("def training_step(self, batch: Dict[str, Tensor]) -> Tensor:\n    return (self.w * 2.0).sum()\n");
  const fs::path step_file = testing::fresh_dir("mixing-training-step") / "step.pt";
  m.save(step_file.string());
  config.model.name = step_file.string();
  const std::string step = config_error(config, data.info());
  EXPECT_NE(step.find("trains through training_step"), std::string::npos) << step;
  EXPECT_NE(step.find("leave these flags at 0"), std::string::npos) << step;

  data::DatasetInfo flat = data.info();
  flat.sample_shape = {48};
  const std::unique_ptr<Model> model = build_model("small_cnn", data.info());
  std::string cutmix = "(no error)";
  try {
    check_mixing(mixing(0, 1.0), *model, flat, "small_cnn");
  } catch (const ConfigError& e) {
    cutmix = e.what();
  }
  EXPECT_NE(cutmix.find("--cutmix pastes a box"), std::string::npos) << cutmix;
  EXPECT_NE(cutmix.find("shaped [48]"), std::string::npos) << cutmix;
}

// Four classes of 48 x 48 JPEGs, one colour each under a textured gradient.
fs::path colour_folder(const fs::path& root) {
  const uint8_t colours[4][3] = {{200, 40, 40}, {40, 190, 60}, {50, 60, 210}, {210, 200, 50}};
  const char* names[4] = {"red", "green", "blue", "yellow"};
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 16; ++i) {
      data::Image img = data::testing::gradient_image(48, 48, 3, 100 * k + i);
      for (int y = 0; y < 48; ++y) {
        for (int x = 0; x < 48 * 3; ++x) {
          img.row(y)[x] = static_cast<uint8_t>((img.row(y)[x] + 3 * colours[k][x % 3]) / 4);
        }
      }
      const std::string file = std::to_string(i) + ".jpg";
      data::testing::write_bytes(root / names[k] / file, data::testing::encode_jpeg(img));
    }
  }
  return root;
}

double mean_of(const std::vector<double>& v, size_t from, size_t count) {
  double sum = 0;
  for (size_t i = from; i < from + count; ++i) sum += v[i];
  return sum / static_cast<double>(count);
}

// The reference recipe's augmentations on the workers and its mixing and smoothing in the
// trainer, set as flags that `simulate` hands every host in hyperparameters.json, on data
// stored as WebDataset shards: the loss falls, and the summary and report say what was on.
TEST(MixingSimulate, TheRecipeTrainsWebDatasetShardsToAFallingLoss) {
  const fs::path dir = testing::fresh_dir("mixing-simulate");
  const fs::path images = colour_folder(dir / "images");
  ASSERT_TRUE(data::testing::folder_as_shards(images, dir / "shards", 4));
  const int code = testing::run_tandem(
      "simulate --data webdataset:" + (dir / "shards/shard-{000..003}.tar").string() +
          " --pipeline 'decode,random_resized_crop(32),hflip,trivial_augment_wide' --mixup 0.2 --cutmix 1.0"
          " --label-smoothing 0.1 --worker-hosts 1 --steps 150 --batch-size 16 --lr 0.02 --log-every 50 --run-dir " +
          (dir / "run").string() + " --summary-json " + (dir / "out/summary.json").string(),
      dir / "run.log", 300);
  ASSERT_EQ(code, 0) << testing::slurp(dir / "run.log");
  const auto s = nlohmann::json::parse(testing::slurp(dir / "out/summary.json"));
  const std::vector<double> losses = s["losses"].get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 150u);
  // Mixed targets keep the loss well above 0 (about 0.9 at the end here, from 1.3): a
  // generous margin, on means over many steps.
  EXPECT_LT(mean_of(losses, 120, 30), 0.85 * mean_of(losses, 0, 15)) << s["losses"].dump();
  EXPECT_EQ(s["settings"]["mixup"], 0.2);
  EXPECT_EQ(s["settings"]["cutmix"], 1.0);
  EXPECT_EQ(s["settings"]["label_smoothing"], 0.1);
  EXPECT_EQ(s["settings"]["dataset"], "webdataset");
  EXPECT_EQ(s["settings"]["dataset_size"], 64) << s["settings"].dump();
  EXPECT_EQ(s["settings"]["num_classes"], 4) << s["settings"].dump();
  fs::path report;  // beside the trainer host's own summary
  for (const auto& f : fs::recursive_directory_iterator(dir / "run")) {
    if (f.path().filename() == "report.html") report = f.path();
  }
  const std::string html = testing::slurp(report);
  EXPECT_NE(html.find("<th class=\"l\">mixup alpha</th><td class=\"l\">0.2</td>"), std::string::npos);
  EXPECT_NE(html.find("<th class=\"l\">label smoothing</th><td class=\"l\">0.1</td>"), std::string::npos);
}

}  // namespace
}  // namespace tandem::training
