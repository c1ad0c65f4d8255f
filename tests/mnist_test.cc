// "mnist": Debian's Fashion-MNIST (dataset-fashion-mnist) and small hand-written idx files,
// gzipped and plain; every way an idx file can be wrong.
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/sources/mnist.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const char* kFashion = "/usr/share/datasets/fashion-mnist";

std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& values) {
  std::vector<uint8_t> out;
  auto be32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
  };
  be32(magic);
  for (uint32_t d : dims) be32(d);
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes, bool gzip) {
  fs::create_directories(path.parent_path());
  if (!gzip) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return;
  }
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// n images of 4x3 where every pixel of image i is 10 * i, labels i % 3.
void write_small_set(const fs::path& dir, const std::string& prefix, uint32_t n, bool gzip) {
  std::vector<uint8_t> pixels, labels;
  for (uint32_t i = 0; i < n; ++i) {
    pixels.insert(pixels.end(), 12, static_cast<uint8_t>(10 * i));
    labels.push_back(static_cast<uint8_t>(i % 3));
  }
  const std::string ext = gzip ? ".gz" : "";
  write_file(dir / (prefix + "-images-idx3-ubyte" + ext), idx_bytes(0x803, {n, 4, 3}, pixels), gzip);
  write_file(dir / (prefix + "-labels-idx1-ubyte" + ext), idx_bytes(0x801, {n}, labels), gzip);
}

std::vector<uint8_t> sample(const Dataset& d, uint64_t index, uint32_t epoch = 0, int64_t* label = nullptr) {
  std::vector<uint8_t> out(d.info().sample_bytes());
  const int64_t l = d.produce(index, epoch, std::as_writable_bytes(std::span<uint8_t>(out)));
  if (label) *label = l;
  return out;
}

std::string config_error(const DataOptions& opts) {
  try {
    make_dataset(opts);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

DataOptions mnist_options(const std::string& path) {
  DataOptions opts;
  opts.data = "mnist:" + path;
  return opts;
}

TEST(Mnist, ReadsDebiansFashionMnistTrainAndTest) {
  if (!fs::exists(kFashion)) GTEST_SKIP() << "install dataset-fashion-mnist (scripts/setup does)";
  auto train = make_dataset(mnist_options(kFashion));
  const DatasetInfo& info = train->info();
  EXPECT_EQ(info.name, "mnist");
  EXPECT_EQ(info.size, 60000u);
  EXPECT_EQ(info.sample_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(info.dtype, DType::kUInt8);
  EXPECT_EQ(info.num_classes, 10);
  EXPECT_EQ(info.mean, std::vector<float>{0.2860f});
  EXPECT_EQ(info.std, std::vector<float>{0.3530f});
  // The first training image is an ankle boot (label 9): dark border, bright object.
  int64_t label = -1;
  const std::vector<uint8_t> first = sample(*train, 0, 0, &label);
  EXPECT_EQ(label, 9);
  EXPECT_EQ(first[0], 0);
  EXPECT_GT(*std::max_element(first.begin(), first.end()), 200);
  // Without augmentation every epoch gives the same bytes.
  EXPECT_EQ(sample(*train, 123, 0), sample(*train, 123, 5));
  DataOptions test_opts = mnist_options(kFashion);
  test_opts.split = "test";
  auto test = make_dataset(test_opts);
  EXPECT_EQ(test->info().size, 10000u);
  EXPECT_NE(test->info().fingerprint, info.fingerprint);
}

TEST(Mnist, AugmentedFashionMnistIsDeterministicPerKey) {
  if (!fs::exists(kFashion)) GTEST_SKIP() << "install dataset-fashion-mnist (scripts/setup does)";
  DataOptions opts = mnist_options(kFashion);
  opts.pipeline = "decode(channels=3),random_resized_crop(32,0.5),hflip,rotation(15),to_uint8";
  opts.dataset_size = 1000;
  auto d = make_dataset(opts);
  EXPECT_EQ(d->info().sample_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(d->info().mean.size(), 3u);
  EXPECT_EQ(sample(*d, 17, 1), sample(*d, 17, 1));
  EXPECT_NE(sample(*d, 17, 1), sample(*d, 17, 2));
  const Batch batch = BatchMaker(d, nullptr).make({0, 0, {1, 2, 3}});
  EXPECT_EQ(batch.dtype, DType::kUInt8);
  EXPECT_EQ(batch.shape, (std::vector<int64_t>{3, 3, 32, 32}));
}

TEST(Mnist, SmallPlainAndGzippedSetsGiveTheSameSamples) {
  for (bool gzip : {false, true}) {
    TempDir dir;
    write_small_set(dir.path(), "train", 5, gzip);
    write_small_set(dir.path(), "t10k", 2, gzip);
    auto d = make_dataset(mnist_options(dir.str()));
    EXPECT_EQ(d->info().size, 5u);
    EXPECT_EQ(d->info().sample_shape, (std::vector<int64_t>{1, 4, 3}));
    EXPECT_EQ(d->info().mean, std::vector<float>{0.1307f});  // MNIST's: the path does not say "fashion"
    int64_t label = -1;
    EXPECT_EQ(sample(*d, 4, 0, &label), std::vector<uint8_t>(12, 40));
    EXPECT_EQ(label, 1);
    DataOptions test = mnist_options(dir.str());
    test.split = "test";
    EXPECT_EQ(make_dataset(test)->info().size, 2u);
    // naming the images file picks its labels file
    const std::string images = (dir.path() / (std::string("t10k-images-idx3-ubyte") + (gzip ? ".gz" : ""))).string();
    EXPECT_EQ(make_dataset(mnist_options(images))->info().size, 2u);
  }
}

TEST(Mnist, ImageSizeResizesAndFingerprintFollowsFiles) {
  TempDir dir;
  write_small_set(dir.path(), "train", 4, false);
  DataOptions opts = mnist_options(dir.str());
  const std::string before = make_dataset(opts)->info().fingerprint;
  opts.image_size = 8;
  auto resized = make_dataset(opts);
  EXPECT_EQ(resized->info().sample_shape, (std::vector<int64_t>{1, 8, 8}));
  EXPECT_EQ(sample(*resized, 2), std::vector<uint8_t>(64, 20));
  write_small_set(dir.path(), "train", 6, false);
  EXPECT_NE(make_dataset(mnist_options(dir.str()))->info().fingerprint, before);
}

TEST(MnistBadData, WrongMagicNumberIsNamed) {
  TempDir dir;
  write_small_set(dir.path(), "train", 3, true);
  write_file(dir.path() / "train-images-idx3-ubyte.gz", idx_bytes(0x801, {36}, std::vector<uint8_t>(36)), true);
  const std::string error = config_error(mnist_options(dir.str()));
  EXPECT_NE(error.find("train-images-idx3-ubyte.gz has magic number 0x00000801, not 0x00000803"), std::string::npos)
      << error;
}

TEST(MnistBadData, TruncatedFilesAreNamed) {
  TempDir dir;
  write_small_set(dir.path(), "train", 3, false);
  write_file(dir.path() / "train-images-idx3-ubyte", idx_bytes(0x803, {3, 4, 3}, std::vector<uint8_t>(30)), false);
  std::string error = config_error(mnist_options(dir.str()));
  EXPECT_NE(error.find("train-images-idx3-ubyte is truncated: its header promises 3 x 4 x 3 = 36 bytes of values, "
                       "but only 30 follow"), std::string::npos) << error;
  // a gzip stream cut short
  TempDir gz;
  write_small_set(gz.path(), "train", 50, true);
  const fs::path labels = gz.path() / "train-labels-idx1-ubyte.gz";
  std::ifstream in(labels, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() - 12);
  write_file(labels, bytes, false);
  error = config_error(mnist_options(gz.str()));
  EXPECT_NE(error.find("train-labels-idx1-ubyte.gz is not a readable idx file"), std::string::npos) << error;
}

TEST(MnistBadData, MismatchedCountsMissingFilesAndTrailingBytes) {
  TempDir dir;
  write_small_set(dir.path(), "train", 3, false);
  write_file(dir.path() / "train-labels-idx1-ubyte", idx_bytes(0x801, {2}, {0, 1}), false);
  EXPECT_NE(config_error(mnist_options(dir.str())).find("holds 3 images but"), std::string::npos);
  write_file(dir.path() / "train-labels-idx1-ubyte", idx_bytes(0x801, {3}, {0, 1, 2, 7}), false);
  EXPECT_NE(config_error(mnist_options(dir.str())).find("has 1 bytes after the 3 values"), std::string::npos);
  DataOptions test = mnist_options(dir.str());
  test.split = "test";
  EXPECT_NE(config_error(test).find("no t10k-images-idx3-ubyte[.gz] in"), std::string::npos);
  EXPECT_NE(config_error(mnist_options(dir.str() + "/nothing")).find("does not exist"), std::string::npos);
}

}  // namespace
}  // namespace tandem::data
