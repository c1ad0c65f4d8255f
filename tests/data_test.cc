#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>

#include <gtest/gtest.h>

#include "tandem/common/error.h"
#include "tandem/data/augment/gaussian_blur.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/core/rng.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/data/sources/synthetic.h"

namespace tandem::data {
namespace {

// A direct transcription of torchvision's blur: 2-D kernel = outer(k, k), reflect
// padding, 2-D convolution, in double precision. The fast separable float version must
// agree with it.
std::vector<float> reference_blur(const std::vector<float>& img, int c, int h, int w, int ksize, float sigma) {
  const std::vector<float> k = gaussian_kernel1d(ksize, sigma);
  const int r = ksize / 2;
  auto reflect = [](int i, int n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); };
  std::vector<float> out(img.size());
  for (int ch = 0; ch < c; ++ch)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        double acc = 0;
        for (int i = 0; i < ksize; ++i)
          for (int j = 0; j < ksize; ++j)
            acc += double(k[i]) * k[j] * img[(ch * h + reflect(y + i - r, h)) * w + reflect(x + j - r, w)];
        out[(ch * h + y) * w + x] = static_cast<float>(acc);
      }
  return out;
}

TEST(GaussianKernel, MatchesTorchvisionFormula) {
  // torchvision: x = linspace(-5, 5, 11); pdf = exp(-0.5 (x / sigma)^2); pdf / sum.
  for (float sigma : {0.1f, 0.7f, 1.0f, 2.0f}) {
    const auto k = gaussian_kernel1d(11, sigma);
    double sum = 0;
    for (int i = 0; i < 11; ++i) sum += std::exp(-0.5 * std::pow((i - 5) / double(sigma), 2));
    for (int i = 0; i < 11; ++i) {
      EXPECT_NEAR(k[i], std::exp(-0.5 * std::pow((i - 5) / double(sigma), 2)) / sum, 1e-7) << sigma;
    }
  }
}

TEST(GaussianBlur, EqualsTwoDimensionalReference) {
  const int c = 3, h = 17, w = 23;
  Rng rng(3);
  std::vector<float> img(c * h * w);
  for (float& v : img) v = static_cast<float>(rng.uniform());
  for (float sigma : {0.1f, 0.9f, 2.0f}) {
    std::vector<float> fast = img, scratch;
    gaussian_blur(fast, c, h, w, 11, sigma, scratch);
    const std::vector<float> slow = reference_blur(img, c, h, w, 11, sigma);
    for (size_t i = 0; i < img.size(); ++i) ASSERT_NEAR(fast[i], slow[i], 1e-5) << "sigma " << sigma << " at " << i;
  }
}

TEST(GaussianBlur, KeepsAConstantImageConstant) {
  std::vector<float> img(3 * 12 * 12, 0.25f), scratch;
  gaussian_blur(img, 3, 12, 12, 11, 1.5f, scratch);
  for (float v : img) EXPECT_NEAR(v, 0.25f, 1e-6);
}

std::vector<std::byte> sample(const Dataset& ds, uint64_t index, uint32_t epoch) {
  std::vector<std::byte> out(ds.info().sample_bytes());
  ds.produce(index, epoch, out);
  return out;
}

TEST(Datasets, SamplesDependOnlyOnSeedEpochAndIndex) {
  for (const char* name : {"synthetic", "blur-benchmark"}) {
    DataOptions opts;
    opts.data = name;
    opts.image_size = 24;
    auto a = make_dataset(opts), b = make_dataset(opts);
    EXPECT_EQ(sample(*a, 5, 1), sample(*b, 5, 1)) << name;
    EXPECT_NE(sample(*a, 5, 1), sample(*a, 5, 2)) << name << ": augmentation must change with the epoch";
    EXPECT_NE(sample(*a, 5, 1), sample(*a, 6, 1)) << name;
    opts.seed = 1;
    EXPECT_NE(sample(*a, 5, 1), sample(*make_dataset(opts), 5, 1)) << name;
    EXPECT_NE(a->info().fingerprint, make_dataset(opts)->info().fingerprint) << name;
  }
}

TEST(Datasets, BlurBenchmarkIsTenBlursOfSeededNoise) {
  DataOptions opts;
  opts.data = "blur-benchmark";
  opts.image_size = 16;
  auto ds = make_dataset(opts);
  std::vector<float> expected(3 * 16 * 16), scratch;
  Rng content(kContentStream, 0, 9);
  for (float& v : expected) v = static_cast<float>(content.uniform());
  Rng augment(kAugmentStream, 0, 2, 9);
  for (int i = 0; i < kBlurRepeats; ++i) {
    const float sigma = static_cast<float>(augment.uniform(kBlurSigmaMin, kBlurSigmaMax));
    expected = reference_blur(expected, 3, 16, 16, kBlurKernel, sigma);
  }
  std::vector<float> got(expected.size());
  EXPECT_EQ(ds->produce(9, 2, std::as_writable_bytes(std::span<float>(got))), 9 % 10);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-5) << i;
}

TEST(Datasets, BadInputIsRejectedWithTheFix) {
  DataOptions opts;
  opts.data = "imagenet-please";
  try {
    make_dataset(opts);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("synthetic"), std::string::npos) << e.what();
  }
  opts.data = "synthetic";
  opts.num_classes = 40;
  EXPECT_THROW(make_dataset(opts), ConfigError);
  opts.num_classes = 10;
  auto ds = make_dataset(opts);
  std::vector<std::byte> out(ds->info().sample_bytes());
  EXPECT_THROW(ds->produce(ds->info().size, 0, out), std::out_of_range);
}

// make_async, waited for: the batch, or the exception it failed with.
Batch make_and_wait(BatchMaker& maker, const BatchRequest& req) {
  std::promise<Batch> promise;
  maker.make_async(BatchRequest(req), [&](Batch b) { promise.set_value(std::move(b)); },
                   [&](std::exception_ptr e) { promise.set_exception(e); });
  return promise.get_future().get();
}

TEST(BatchMaker, PoolAndCallingThreadBuildIdenticalBatches) {
  DataOptions opts;
  opts.data = "blur-benchmark";
  opts.image_size = 20;
  auto ds = make_dataset(opts);
  ThreadPool pool(3);
  BatchMaker maker(ds, &pool);
  BatchRequest req{4, 1, {9, 2, 7, 7, 0}};
  Batch pooled = make_and_wait(maker, req);
  Batch direct = maker.make(req);
  EXPECT_EQ(pooled.sequence, 4u);
  EXPECT_EQ(pooled.shape, (std::vector<int64_t>{5, 3, 20, 20}));
  EXPECT_EQ(pooled.labels, (std::vector<int64_t>{9, 2, 7, 7, 0}));
  EXPECT_EQ(pooled.data, direct.data);
  EXPECT_GT(pooled.compute_seconds, 0);
}

// --emulate-slowdown: a core k times slower takes k times the CPU time, and that is what
// the batch reports; the batch itself is unchanged. One pool thread, so the wall time is
// at least the CPU time plus the (k-1)x sleep: reported/k x (k-1) of it is sleep.
TEST(BatchMaker, AnEmulatedSlowdownStretchesTheTimeAndReportsIt) {
  DataOptions opts;
  opts.data = "blur-benchmark";
  opts.image_size = 32;
  auto ds = make_dataset(opts);
  ThreadPool pool(1);
  BatchMaker maker(ds, &pool);
  maker.set_slowdown(4);
  const BatchRequest req{0, 0, {1, 2, 3, 4, 5, 6, 7, 8}};
  const auto start = std::chrono::steady_clock::now();
  const Batch slow = make_and_wait(maker, req);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(wall, slow.compute_seconds * 3 / 4) << "the sleep is 3/4 of the reported time";
  EXPECT_EQ(slow.data, maker.make(req).data);
}

TEST(BatchMaker, ReportsABadIndex) {
  DataOptions opts;
  auto ds = make_dataset(opts);
  ThreadPool pool(2);
  BatchMaker maker(ds, &pool);
  std::promise<std::string> promise;
  maker.make_async(BatchRequest{0, 0, {1, ds->info().size + 5}}, [&](Batch) { promise.set_value("ok"); },
                   [&](std::exception_ptr e) {
                     try { std::rethrow_exception(e); } catch (const std::exception& ex) { promise.set_value(ex.what()); }
                   });
  EXPECT_NE(promise.get_future().get().find("outside dataset"), std::string::npos);
}

TEST(Sampler, EveryEpochIsAPermutationSplitAcrossRanks) {
  const uint64_t n = 103;
  const int batch = 5, world = 2;
  Sampler r0(n, batch, 1, 0, world), r1(n, batch, 1, 1, world);
  EXPECT_EQ(r0.batches_per_epoch(), n / (batch * world));
  for (uint32_t epoch = 0; epoch < 2; ++epoch) {
    std::set<uint64_t> seen;
    for (uint64_t b = 0; b < r0.batches_per_epoch(); ++b) {
      const uint64_t seq = epoch * r0.batches_per_epoch() + b;
      for (const Sampler* s : {&r0, &r1}) {
        BatchRequest req = s->request(seq);
        EXPECT_EQ(req.epoch, epoch);
        EXPECT_EQ(req.indices.size(), static_cast<size_t>(batch));
        for (uint64_t i : req.indices) EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " twice in epoch " << epoch;
      }
    }
    EXPECT_EQ(seen.size(), r0.batches_per_epoch() * batch * world);
  }
  EXPECT_NE(r0.request(0).indices, r0.request(r0.batches_per_epoch()).indices) << "each epoch reshuffles";
}

TEST(Sampler, RejectsADatasetSmallerThanOneBatch) {
  EXPECT_THROW(Sampler(10, 8, 0, 0, 2), ConfigError);
  EXPECT_THROW(Sampler(10, 0, 0), ConfigError);
}

}  // namespace
}  // namespace tandem::data

namespace tandem::data {
namespace {

void write_file(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

// A Kubernetes or Docker CPU limit is a cgroup quota: cores follow it, not only the
// affinity mask. Fake cgroup trees, v2 and v1.
TEST(Cores, TheCgroupCpuQuotaCapsTheCores) {
  const auto root = std::filesystem::temp_directory_path() / ("tandem-cgroup-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  // v2: the pod's cgroup says 1.5 cores, its parent 4: the smaller, rounded up, is 2.
  write_file(root / "v2/kubepods/pod1/cpu.max", "150000 100000\n");
  write_file(root / "v2/kubepods/cpu.max", "400000 100000\n");
  EXPECT_EQ(cgroup_cpu_limit((root / "v2").string(), "0::/kubepods/pod1\n"), 2);
  write_file(root / "v2/kubepods/pod1/cpu.max", "max 100000\n");
  EXPECT_EQ(cgroup_cpu_limit((root / "v2").string(), "0::/kubepods/pod1\n"), 4) << "no limit here, the parent's";
  write_file(root / "v2ns/cpu.max", "300000 100000\n");  // inside a cgroup namespace the pod is "/"
  EXPECT_EQ(cgroup_cpu_limit((root / "v2ns").string(), "0::/\n"), 3);
  // v1: cpu,cpuacct hierarchy, quota -1 = none.
  write_file(root / "v1/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000\n");
  write_file(root / "v1/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(cgroup_cpu_limit((root / "v1").string(), "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n"), 1);
  write_file(root / "v1/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(cgroup_cpu_limit((root / "v1").string(), "4:cpu,cpuacct:/docker/abc\n"), 0);
  EXPECT_EQ(cgroup_cpu_limit((root / "none").string(), "garbage\n0::/x\n"), 0);
  EXPECT_GE(available_cores(), 1);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tandem::data
