// The trainer's data path and gradient synchronisation, in-process on the CPU: the code
// that runs on a GPU too (the CUDA variant of this suite compiles the GPU branches).
#include <atomic>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tandem/data/core/buffer.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"
#include "training/collective.h"
#include "training/device_feed.h"
#include "training/evaluate.h"
#include "training/fused_optim.h"
#include "training/optim.h"
#include "training/model.h"
#include "training/reducer.h"

namespace {

using namespace tandem;
using namespace tandem::training;

data::DatasetInfo image_info(int channels, int side, int classes) {
  data::DatasetInfo info;
  info.name = "test";
  info.sample_shape = {channels, side, side};
  info.num_classes = classes;
  info.dtype = data::DType::kUInt8;
  return info;
}

// Two copies of one model: the same initial parameters.
std::pair<torch::nn::AnyModule, torch::nn::AnyModule> twins(const std::string& name, const data::DatasetInfo& info) {
  torch::manual_seed(3);
  torch::nn::AnyModule a = make_model(name, info);
  torch::manual_seed(3);
  torch::nn::AnyModule b = make_model(name, info);
  return {a, b};
}

TEST(Reducer, GradientsAreViewsOfReverseOrderBucketsAndEqualPlainBackward) {
  const auto info = image_info(3, 32, 10);
  auto [model, plain] = twins("resnet18", info);
  DistInfo alone;
  Collective collective(alone, torch::kCPU);
  const std::vector<torch::Tensor> params = model.ptr()->parameters();
  Reducer reducer(params, collective, /*overlap=*/true, /*first_bucket_bytes=*/64 << 10, /*bucket_bytes=*/4 << 20);
  ASSERT_GT(reducer.bucket_count(), 2);
  // The first bucket is the small one and holds the last parameter (its gradient is first).
  EXPECT_LE(reducer.bucket(0).nbytes(), std::max<size_t>(64 << 10, params.back().nbytes()));
  EXPECT_EQ(params.back().grad().data_ptr(), reducer.bucket(0).data_ptr()) << "last parameter leads bucket 0";

  const torch::Tensor x = torch::randn({4, 3, 32, 32});
  const torch::Tensor y = torch::tensor({1, 2, 3, 4});
  for (int step = 0; step < 2; ++step) {  // the second step shows zero_grad resets the buckets
    reducer.zero_grad();
    torch::nn::functional::cross_entropy(model.forward(x), y).backward();
    reducer.finish();
    for (auto& p : plain.ptr()->parameters()) p.mutable_grad() = torch::Tensor();
    torch::nn::functional::cross_entropy(plain.forward(x), y).backward();
  }
  const auto expected = plain.ptr()->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor& g = params[i].grad();
    bool in_a_bucket = false;
    for (int64_t b = 0; b < reducer.bucket_count(); ++b) {
      in_a_bucket |= g.storage().data_ptr().get() == reducer.bucket(b).storage().data_ptr().get();
    }
    EXPECT_TRUE(in_a_bucket) << "parameter " << i << "'s gradient is not a bucket view";
    EXPECT_TRUE(torch::equal(g, expected[i].grad())) << "parameter " << i;
  }
}

TEST(Reducer, ChannelsLastGradientsKeepTheirLayout) {
  auto [model, unused] = twins("small_cnn", image_info(3, 16, 10));
  for (auto& p : model.ptr()->parameters()) {
    if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
  }
  DistInfo alone;
  Collective collective(alone, torch::kCPU);
  Reducer reducer(model.ptr()->parameters(), collective, true);
  for (auto& p : model.ptr()->parameters()) {
    if (p.dim() == 4) {
      EXPECT_TRUE(p.grad().is_contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
}

TEST(Reducer, ClippingOnTheDeviceEqualsTorchClipGradNorm) {
  const auto info = image_info(3, 16, 10);
  auto [model, plain] = twins("small_cnn", info);
  DistInfo alone;
  Collective collective(alone, torch::kCPU);
  Reducer reducer(model.ptr()->parameters(), collective, true, 1 << 10, 1 << 14);
  const torch::Tensor x = torch::randn({8, 3, 16, 16}) * 50;  // large enough that clipping bites
  const torch::Tensor y = torch::randint(0, 10, {8});
  reducer.zero_grad();
  torch::nn::functional::cross_entropy(model.forward(x), y).backward();
  reducer.clip_grad_norm(0.5);
  torch::nn::functional::cross_entropy(plain.forward(x), y).backward();
  const double norm = torch::nn::utils::clip_grad_norm_(plain.ptr()->parameters(), 0.5);
  ASSERT_GT(norm, 0.5) << "the test needs gradients that get clipped";
  const auto a = model.ptr()->parameters(), b = plain.ptr()->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i].grad(), b[i].grad(), 1e-5, 1e-7)) << i;
}

TEST(DeviceFeed, ConvertsUint8ToNormalisedChannelsLastInput) {
  data::DatasetInfo info = image_info(3, 4, 10);
  info.mean = {0.5f, 0.4f, 0.3f};
  info.std = {0.2f, 0.25f, 0.3f};
  const torch::Tensor raw = torch::randint(0, 256, {2, 3, 4, 4}, torch::kUInt8);
  uint64_t served = 0;
  auto next = [&]() -> std::optional<data::Batch> {
    if (served == 3) return std::nullopt;
    data::Batch b;
    b.sequence = served++;
    b.shape = {2, 3, 4, 4};
    b.dtype = data::DType::kUInt8;
    b.labels = {1, 7};
    b.data = data::Buffer(raw.nbytes());
    std::memcpy(b.data.data(), raw.data_ptr(), raw.nbytes());
    return b;
  };
  DeviceFeed feed(next, info, torch::kCPU, InputFormat{torch::kFloat32, /*channels_last=*/true});
  const torch::Tensor mean = torch::tensor(info.mean).view({1, 3, 1, 1});
  const torch::Tensor std = torch::tensor(info.std).view({1, 3, 1, 1});
  const torch::Tensor expected = (raw.to(torch::kFloat32) / 255.0 - mean) / std;
  int taken = 0;
  ASSERT_TRUE(feed.prefetch());
  while (std::optional<DeviceBatch> b = feed.take()) {
    feed.prefetch();
    EXPECT_EQ(b->sequence, static_cast<uint64_t>(taken++));
    EXPECT_TRUE(b->x.is_contiguous(torch::MemoryFormat::ChannelsLast));
    EXPECT_TRUE(torch::allclose(b->x, expected, 1e-5, 1e-5)) << (b->x - expected).abs().max().item<float>();
    EXPECT_TRUE(torch::equal(b->y, torch::tensor({1, 7})));
  }
  EXPECT_EQ(taken, 3);
  const auto [wait, convert] = feed.drain_times();
  EXPECT_GE(wait, 0.0);
  EXPECT_GT(convert, 0.0);
}

TEST(DeviceFeed, ABatchOfTheWrongShapeOrSizeIsRefusedWithTheReason) {
  const data::DatasetInfo info = image_info(3, 4, 10);
  for (const bool wrong_shape : {true, false}) {
    auto next = [&]() -> std::optional<data::Batch> {
      data::Batch b;
      b.sequence = 12;
      b.shape = wrong_shape ? std::vector<int64_t>{1, 3, 5, 5} : std::vector<int64_t>{1, 3, 4, 4};
      b.dtype = data::DType::kUInt8;
      b.labels = {1};
      b.data = data::Buffer(wrong_shape ? 75 : 47);
      return b;
    };
    DeviceFeed feed(next, info, torch::kCPU, InputFormat{});
    try {
      feed.prefetch();
      FAIL() << "accepted a broken batch";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("batch 12"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(wrong_shape ? "wrong sample shape" : "bytes"), std::string::npos) << e.what();
    }
  }
}

TEST(Evaluate, ShardsCoverTheSetOnceAndSumToTheSingleRankCounts) {
  DataOptions opts;
  opts.data = "synthetic";
  opts.dataset_size = 1000;
  opts.split = "test";
  const auto eval = data::make_dataset(opts);
  torch::manual_seed(1);
  const std::unique_ptr<Model> model = build_model("small_cnn", eval->info());
  const EvalCounts whole = evaluate_shard(*model, eval, 0, 1, torch::kCPU, InputFormat{});
  EXPECT_EQ(whole.samples, 1000);
  for (const int world : {2, 3, 7}) {
    EvalCounts sum;
    for (int rank = 0; rank < world; ++rank) {
      const EvalCounts c = evaluate_shard(*model, eval, rank, world, torch::kCPU, InputFormat{});
      sum.correct += c.correct;
      sum.samples += c.samples;
    }
    EXPECT_EQ(sum.samples, whole.samples) << world << " ranks";
    EXPECT_EQ(sum.correct, whole.correct) << world << " ranks";
  }
  EXPECT_TRUE(model->is_training()) << "evaluation must restore train mode";
}

TEST(FusedOptimizer, StepsEqualTheCppOptimizersAndShareTheirCheckpoints) {
  if (!fused_optimizers_available()) GTEST_SKIP() << "this LibTorch has no fused optimizer kernels (they need 2.6+)";
  const auto info = image_info(3, 16, 10);
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    OptimizerOptions opts;
    opts.optimizer = name;
    opts.lr = 0.01;
    opts.weight_decay = 0.01;
    auto [a, b] = twins("small_cnn", info);
    auto fused = make_fused_optimizer(opts, a.ptr()->parameters());
    opts.fused = false;
    auto plain = make_optimizer(opts, b.ptr()->parameters(), torch::kCPU);
    ASSERT_TRUE(fused);
    EXPECT_NE(typeid(*fused), typeid(*plain)) << "make_fused_optimizer fell back to the C++ optimizer";
    for (int step = 0; step < 3; ++step) {
      const torch::Tensor x = torch::randn({4, 3, 16, 16});
      const torch::Tensor y = torch::randint(0, 10, {4});
      for (auto* m : {&a, &b}) {
        for (auto& p : m->ptr()->parameters()) p.mutable_grad() = torch::Tensor();
        torch::nn::functional::cross_entropy(m->forward(x), y).backward();
      }
      fused->step();
      plain->step();
    }
    const auto pa = a.ptr()->parameters(), pb = b.ptr()->parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_TRUE(torch::allclose(pa[i], pb[i], 1e-5, 1e-6)) << name << " parameter " << i;
    }
    // The fused optimizer's state is the C++ optimizer's: a checkpoint of one loads into the other.
    torch::serialize::OutputArchive out;
    fused->save(out);
    std::ostringstream bytes;
    out.save_to(bytes);
    std::istringstream in(bytes.str());
    torch::serialize::InputArchive archive;
    archive.load_from(in);
    plain->load(archive);
  }
}

// The allocator hook: every batch buffer comes from it and goes back to it, which is how
// a CUDA trainer receives batches straight into pinned memory.
std::atomic<int> g_allocated{0}, g_freed{0};

data::BufferBlock counting_block(size_t size) {
  ++g_allocated;
  data::BufferBlock b = data::heap_block(size);
  b.free = [](void* c) {
    ++g_freed;
    delete[] static_cast<std::byte*>(c);
  };
  return b;
}

TEST(Buffer, AnInstalledAllocatorMakesAndFreesEveryBuffer) {
  data::set_buffer_allocator(&counting_block);
  {
    data::Buffer a(100), b(7);
    data::Buffer moved = std::move(a);
    EXPECT_EQ(moved.size(), 100u);
    const data::BufferBlock released = b.release();
    released.free(released.context);
  }
  data::set_buffer_allocator(nullptr);
  data::Buffer heap(5);
  EXPECT_EQ(g_allocated.load(), 2);
  EXPECT_EQ(g_freed.load(), 2);
}

}  // namespace
