// training_step models: a TorchScript module with `training_step(self, batch: Dict[str,
// Tensor]) -> Tensor` trains on any fields. Its batches (every field by name, a ragged
// one with NAME_lengths and NAME_offsets), the check at start and its errors, and the
// loop on one rank. The modules are written here, in TorchScript, with no Python.
// (Torch world: includes the training module's private headers.)
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/torch.h>

#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/training/trainer.h"
#include "training/device_feed.h"
#include "training/model.h"

namespace tandem::training {
namespace {

namespace fs = std::filesystem;

// A module with one parameter `w` (ones, `size` values) and `source`'s methods, saved as
// TorchScript in a fresh folder; returns the file.
fs::path script_file(const std::string& name, const std::string& source, int64_t size = 1) {
  torch::jit::Module m("__torch__.Step");
  m.register_parameter("w", torch::ones({size}).requires_grad_(), /*is_buffer=*/false);
  m.define(source);
  const fs::path file = testing::fresh_dir("training-step-" + name) / (name + ".pt");
  m.save(file.string());
  return file;
}

// image uint8 [3, 4, 4], mask uint8 [4, 4], boxes float32 [-1, 4], classes int64 [-1].
data::DatasetInfo detection_info() {
  data::DatasetInfo info;
  info.name = "detection";
  info.size = 100;
  info.sample_shape = {3, 4, 4};
  info.dtype = data::DType::kUInt8;
  info.fields = {{"image", data::DType::kUInt8, {3, 4, 4}},
                 {"boxes", data::DType::kFloat32, {-1, 4}},
                 {"classes", data::DType::kInt64, {-1}},
                 {"mask", data::DType::kUInt8, {4, 4}}};
  return info;
}

template <typename T>
data::Buffer buffer_of(const std::vector<T>& values) {
  data::Buffer b(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(b.data(), values.data(), b.size());
  return b;
}

template <typename T>
data::Field field(const std::string& name, data::DType dtype, std::vector<int64_t> shape, const std::vector<T>& values,
                  std::vector<int64_t> lengths = {}) {
  data::Field f;
  f.name = name;
  f.dtype = dtype;
  f.shape = std::move(shape);
  f.lengths = std::move(lengths);
  f.data = buffer_of(values);
  return f;
}

// Three samples of detection_info(): sample i's image and mask are all i; it has
// lengths[i] boxes, box j of sample i being [i, j, 10 + i, 10 + j], each of class 7 * i + j.
data::Batch detection_batch(uint64_t sequence, const std::vector<int64_t>& lengths = {2, 0, 1}) {
  data::Batch b;
  b.sequence = sequence;
  b.dtype = data::DType::kUInt8;
  const int64_t n = static_cast<int64_t>(lengths.size());
  b.shape = {n, 3, 4, 4};
  std::vector<uint8_t> image, mask;
  std::vector<float> boxes;
  std::vector<int64_t> classes;
  for (int64_t i = 0; i < n; ++i) {
    image.insert(image.end(), 48, static_cast<uint8_t>(i));
    mask.insert(mask.end(), 16, static_cast<uint8_t>(i));
    for (int64_t j = 0; j < lengths[static_cast<size_t>(i)]; ++j) {
      boxes.insert(boxes.end(), {float(i), float(j), float(10 + i), float(10 + j)});
      classes.push_back(7 * i + j);
    }
  }
  b.data = buffer_of(image);
  const auto rows = static_cast<int64_t>(classes.size());
  b.fields.push_back(field("boxes", data::DType::kFloat32, {rows, 4}, boxes, lengths));
  b.fields.push_back(field("classes", data::DType::kInt64, {rows}, classes, lengths));
  b.fields.push_back(field("mask", data::DType::kUInt8, {n, 4, 4}, mask));
  return b;
}

// The DeviceBatch a fields feed makes of `batch` on the CPU.
DeviceBatch through_feed(data::Batch batch, const data::DatasetInfo& info) {
  std::optional<data::Batch> pending = std::move(batch);
  InputFormat format;
  format.fields = true;
  DeviceFeed feed([&] { return std::exchange(pending, std::nullopt); }, info, torch::kCPU, format);
  EXPECT_TRUE(feed.prefetch());
  std::optional<DeviceBatch> d = feed.take();
  EXPECT_TRUE(d.has_value());
  // The tensors view the feed's host batch, which goes with the feed: keep copies.
  for (auto& [name, t] : d->fields) t = t.clone();
  return std::move(*d);
}

const torch::Tensor& named(const DeviceBatch& d, const std::string& name) {
  for (const auto& [n, t] : d.fields) {
    if (n == name) return t;
  }
  throw std::out_of_range("no field " + name);
}

std::string config_error(const fs::path& model, const data::DatasetInfo& info) {
  try {
    build_model(model.string(), info);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainingStepBatches, EveryFieldArrivesNamedAsTheDatasetMadeIt) {
  const data::DatasetInfo info = detection_info();
  ASSERT_EQ(data::batch_problem(detection_batch(0), info), "");
  const DeviceBatch d = through_feed(detection_batch(4), info);
  EXPECT_EQ(d.size, 3);
  EXPECT_EQ(d.sequence, 4u);
  EXPECT_FALSE(d.x.defined());
  EXPECT_EQ(batch_text(d.fields),
            "image uint8 [3, 3, 4, 4], boxes float32 [3, 4], boxes_lengths int64 [3], boxes_offsets int64 [4], "
            "classes int64 [3], classes_lengths int64 [3], classes_offsets int64 [4], mask uint8 [3, 4, 4]");
  EXPECT_EQ(named(d, "image")[2][1][3][0].item<int>(), 2) << "uint8 as made: not scaled";
  EXPECT_TRUE(torch::equal(named(d, "mask")[1], torch::ones({4, 4}, torch::kUInt8)));
  EXPECT_TRUE(torch::equal(named(d, "boxes_lengths"), torch::tensor(std::vector<int64_t>{2, 0, 1})));
  EXPECT_TRUE(torch::equal(named(d, "boxes_offsets"), torch::tensor(std::vector<int64_t>{0, 2, 2, 3})));
  EXPECT_TRUE(torch::equal(named(d, "boxes")[2], torch::tensor({2.0f, 0.0f, 12.0f, 10.0f})));
  EXPECT_TRUE(torch::equal(named(d, "classes"), torch::tensor(std::vector<int64_t>{0, 1, 14})));
}

// A dataset without image or label: only its own fields, a ragged one with no rows at all.
TEST(TrainingStepBatches, ADatasetWithoutImageOrLabelAndARaggedFieldWithNoRows) {
  data::DatasetInfo info;
  info.name = "tokens";
  info.size = 10;
  info.fields = {{"tokens", data::DType::kInt32, {-1}}, {"target", data::DType::kFloat32, {}}};
  data::Batch b;
  b.shape = {2};
  b.fields.push_back(field<int32_t>("tokens", data::DType::kInt32, {0}, {}, {0, 0}));
  b.fields.push_back(field<float>("target", data::DType::kFloat32, {2}, {1.5f, -2.0f}));
  ASSERT_EQ(data::batch_problem(b, info), "");
  const DeviceBatch d = through_feed(std::move(b), info);
  EXPECT_EQ(batch_text(d.fields), "tokens int32 [0], tokens_lengths int64 [2], tokens_offsets int64 [3], target float32 [2]");
  EXPECT_TRUE(torch::equal(named(d, "target"), torch::tensor({1.5f, -2.0f})));
}

// The module reads each sample's boxes through NAME_offsets and NAME_lengths: the loss
// says what it found, sample by sample.
TEST(TrainingStepModels, RaggedLengthsAndOffsetsReachTheModule) {
  const fs::path file = script_file("ragged", R"(
def training_step(self, batch: Dict[str, Tensor]) -> Tensor:
    boxes = batch["boxes"]
    offsets = batch["boxes_offsets"]
    lengths = batch["boxes_lengths"]
    total = self.w.sum() * 0
    for i in range(int(lengths.size(0))):
        rows = boxes[int(offsets[i]):int(offsets[i + 1])]
        assert rows.size(0) == int(lengths[i])
        total = total + rows[:, 2].sum() * (10 ** i) + float(batch["mask"][i].sum()) * 1000
    return total
)");
  const auto model = build_model(file.string(), detection_info());
  ASSERT_TRUE(model->has_training_step());
  const DeviceBatch d = through_feed(detection_batch(0, {2, 0, 1}), detection_info());
  // Sample 0: two boxes with x2 = 10; sample 1: none; sample 2: one with x2 = 12. Masks 0, 16, 32.
  EXPECT_EQ(model->training_step(d.fields).item<double>(), 20 + 0 + 1200 + 1000 * 48);
}

TEST(TrainingStepModels, AModuleThatRaisesGivesOneErrorWithItsMessageAndTheBatch) {
  const fs::path file = script_file("raises", R"(
def training_step(self, batch: Dict[str, Tensor]) -> Tensor:
    assert batch["boxes"].size(1) == 5, "boxes must be cx, cy, w, h, angle"
    return self.w.sum()
)");
  const std::string e = config_error(file, detection_info());
  EXPECT_NE(e.find("--model " + file.string() + "'s training_step fails on a batch of 2 zero samples built from "
                   "dataset detection's schema (image uint8 [2, 3, 4, 4], boxes float32 [3, 4], boxes_lengths int64 "
                   "[2], boxes_offsets int64 [3], classes int64 [3], classes_lengths int64 [2], classes_offsets int64 "
                   "[3], mask uint8 [2, 4, 4])"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("boxes must be cx, cy, w, h, angle"), std::string::npos) << e;
  EXPECT_NE(e.find("training_step(self, batch: Dict[str, Tensor]) -> Tensor"), std::string::npos) << e;
  const std::string missing = config_error(script_file("missing", R"(
def training_step(self, batch: Dict[str, Tensor]) -> Tensor:
    return (self.w * batch["depth"]).sum()
)"),
                                           detection_info());
  EXPECT_NE(missing.find("training_step fails on"), std::string::npos) << missing;
}

TEST(TrainingStepModels, ALossThatIsNotAScalarWithAGradientIsRefused) {
  const std::string per_box = config_error(script_file("per-box", R"(
def training_step(self, batch: Dict[str, Tensor]) -> Tensor:
    return (batch["boxes"] * self.w).sum(1)
)"),
                                           detection_info());
  EXPECT_NE(per_box.find("training_step returns float32 [3] for a batch of 2 zero samples"), std::string::npos)
      << per_box;
  EXPECT_NE(per_box.find("must return the loss as a floating-point scalar tensor"), std::string::npos) << per_box;
  const std::string count = config_error(script_file("count", R"(
def training_step(self, batch: Dict[str, Tensor]) -> Tensor:
    return batch["boxes_lengths"].sum()
)"),
                                         detection_info());
  EXPECT_NE(count.find("training_step returns int64 []"), std::string::npos) << count;
  const std::string detached = config_error(script_file("detached", R"(
def training_step(self, batch: Dict[str, Tensor]) -> Tensor:
    return (batch["boxes"] * self.w).sum().detach()
)"),
                                            detection_info());
  EXPECT_NE(detached.find("returns a loss without a gradient"), std::string::npos) << detached;
  const std::string list = config_error(script_file("list", R"(
def training_step(self, batch: Dict[str, Tensor]) -> List[Tensor]:
    return [self.w.sum()]
)"),
                                        detection_info());
  EXPECT_NE(list.find("training_step returns a GenericList"), std::string::npos) << list;
}

// Without training_step, a dataset that is not image + label is refused, naming the way out.
TEST(TrainingStepModels, WithoutTrainingStepADatasetWithoutALabelIsRefusedNamingIt) {
  data::DatasetInfo info = detection_info();
  const std::string forward_only = config_error(script_file("forward", R"(
def forward(self, x: Tensor) -> Tensor:
    return x.flatten(1)[:, :10] * self.w
)"),
                                                info);
  EXPECT_NE(forward_only.find("has no training_step method: dataset 'detection' has no 'label' field (its fields: "
                              "image uint8 [3,4,4], boxes float32 [-1,4], classes int64 [-1], mask uint8 [4,4])"),
            std::string::npos)
      << forward_only;
  EXPECT_NE(forward_only.find("training_step(self, batch: Dict[str, Tensor]) -> Tensor"), std::string::npos)
      << forward_only;
  const std::string builtin = config_error("small_cnn", info);
  EXPECT_NE(builtin.find("--model small_cnn: dataset 'detection' has no 'label' field"), std::string::npos) << builtin;
}

const char* kRegression = R"(
def training_step(self, batch: Dict[str, Tensor]) -> Tensor:
    x = batch["boxes"][:, 0]
    y = batch["boxes"][:, 1]
    return ((x * self.w[0] + self.w[1] - y) ** 2).mean()
)";

// Batches of detection_info() with 1, 2 and 1 boxes, every step alike.
NextBatch regression_batches() {
  auto sequence = std::make_shared<uint64_t>(0);
  return [sequence]() -> std::optional<data::Batch> { return detection_batch((*sequence)++, {1, 2, 1}); };
}

// A run stopped after a checkpoint resumes a training_step model where it was: the losses
// after the checkpoint are those of the run that was not stopped, bit for bit.
TEST(TrainingStepTrainer, ACheckpointResumesWithTheSameLosses) {
  const fs::path file = script_file("resume", kRegression, 2);
  TrainerConfig config;
  config.model.name = file.string();
  config.optimizer.steps = config.loop.steps = 12;
  config.checkpoints.every = 6;
  const TrainReport whole = Trainer(config, detection_info(), DistInfo{}, RunPaths{})
                                .run(regression_batches(), std::atomic<bool>(false));
  const RunPaths paths{(testing::fresh_dir("training-step-checkpoints") / "checkpoints").string(), ""};
  Trainer(config, detection_info(), DistInfo{}, paths).run(regression_batches(), std::atomic<bool>(false), {6});
  Trainer resumed(config, detection_info(), DistInfo{}, paths);
  ASSERT_EQ(resumed.start_step(), 6);
  NextBatch later = regression_batches();
  for (int i = 0; i < 6; ++i) later();  // the batches of steps 0 to 5 went to the first run
  const TrainReport rest = resumed.run(later, std::atomic<bool>(false));
  ASSERT_EQ(whole.losses.size(), 12u);
  ASSERT_EQ(rest.losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(rest.losses[i], whole.losses[6 + i]) << "step " << 6 + i;
}

// The loop on one rank: training_step replaces forward + loss even on image + label data,
// the loss falls, and --eval-data is set aside (the model is no classifier to score).
TEST(TrainingStepTrainer, TrainsOnFieldsAndTheLossFalls) {
  // Fits each box's y1 (its index in the sample) from its x1 (the sample's index).
  const fs::path file = script_file("regress", kRegression, 2);
  TrainerConfig config;
  config.model.name = file.string();
  config.optimizer.steps = config.loop.steps = 30;
  config.loop.log_every = 10;
  data::DatasetInfo info = detection_info();
  info.fields.push_back({"label", data::DType::kInt64, {}});
  info.num_classes = 3;
  DataOptions eval_data;
  eval_data.data = "synthetic";
  Trainer trainer(config, info, DistInfo{}, RunPaths{}, data::make_dataset(eval_data));
  NextBatch batches = regression_batches();
  const TrainReport r = trainer.run(
      [&] {
        std::optional<data::Batch> b = batches();
        b->labels = {0, 1, 2};
        return b;
      },
      std::atomic<bool>(false));
  ASSERT_EQ(r.losses.size(), 30u);
  EXPECT_LT(r.losses.back(), 0.5 * r.losses.front());
  EXPECT_TRUE(r.eval_history.empty()) << "a training_step model is not evaluated";
}

}  // namespace
}  // namespace tandem::training
