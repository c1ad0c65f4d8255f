// "imagefolder": indexing (order, labels, hidden and non-image files), samples from JPEG
// and PNG files, the fingerprint, determinism, and every kind of bad data under
// --on-bad-sample fail and skip.
#include <filesystem>
#include <future>
#include <set>

#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "tandem/common/error.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/sources/image_folder.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::encode_jpeg;
using testing::encode_png;
using testing::gradient_image;
using testing::jpeg_declaring;
using testing::png_declaring;
using testing::write_bytes;

// cats: 3 JPEGs (one in a subfolder), dogs: 2 PNGs and a JPEG, plus files to ignore.
void make_folder(const fs::path& root) {
  write_bytes(root / "cats" / "b.jpg", encode_jpeg(gradient_image(60, 80, 3, 1)));
  write_bytes(root / "cats" / "a.JPEG", encode_jpeg(gradient_image(50, 40, 3, 2)));
  write_bytes(root / "cats" / "sub" / "c.jpg", encode_jpeg(gradient_image(33, 45, 1, 3)));
  write_bytes(root / "dogs" / "x.png", encode_png(gradient_image(40, 40, 3, 4), PNG_FORMAT_RGB));
  write_bytes(root / "dogs" / "y.png", encode_png(gradient_image(30, 70, 1, 5), PNG_FORMAT_GRAY));
  write_bytes(root / "dogs" / "z.jpeg", encode_jpeg(gradient_image(64, 48, 3, 6)));
  write_bytes(root / "dogs" / "notes.txt", {'h', 'i'});
  write_bytes(root / ".cache" / "q.jpg", encode_jpeg(gradient_image(8, 8, 3, 7)));
  write_bytes(root / "dogs" / ".hidden.jpg", {'x'});
}

DataOptions folder_options(const fs::path& root, const std::string& pipeline = "decode,random_resized_crop(32),hflip") {
  DataOptions opts;
  opts.data = "imagefolder:" + root.string();
  opts.pipeline = pipeline;
  opts.seed = 3;
  return opts;
}

std::vector<uint8_t> sample(const Dataset& d, uint64_t index, uint32_t epoch, int64_t* label = nullptr) {
  std::vector<uint8_t> out(d.info().sample_bytes());
  const int64_t l = d.produce(index, epoch, std::as_writable_bytes(std::span<uint8_t>(out)));
  if (label) *label = l;
  return out;
}

// The message of the error that making the dataset (ConfigError: settings, folders) or
// sample `index` (DataError: a file) raises.
std::string config_error(const DataOptions& opts, uint64_t index = 0) {
  try {
    auto d = make_dataset(opts);
    sample(*d, index, 0);
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(ImageFolder, IndexesClassesAndFilesInTorchvisionOrder) {
  TempDir dir;
  make_folder(dir.path());
  const FolderIndex index = index_folder(dir.str());
  EXPECT_EQ(index.classes, (std::vector<std::string>{"cats", "dogs"}));
  std::vector<std::string> paths;
  std::vector<int> labels;
  for (const ImageFile& f : index.files) paths.push_back(f.path), labels.push_back(f.label);
  // files of a folder before its subfolders' (sorted(os.walk)), byte order ('J' < 'b')
  EXPECT_EQ(paths, (std::vector<std::string>{"cats/a.JPEG", "cats/b.jpg", "cats/sub/c.jpg", "dogs/x.png", "dogs/y.png",
                                             "dogs/z.jpeg"}));
  EXPECT_EQ(labels, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(index.ignored, 1u);  // notes.txt; hidden files and folders are not even counted
  EXPECT_EQ(index.files[0].bytes, fs::file_size(dir.path() / "cats" / "a.JPEG"));
}

TEST(ImageFolder, MakesUint8SamplesFromJpegAndPngWithLabels) {
  TempDir dir;
  make_folder(dir.path());
  auto d = make_dataset(folder_options(dir.path()));
  const DatasetInfo& info = d->info();
  EXPECT_EQ(info.name, "imagefolder");
  EXPECT_EQ(info.size, 6u);
  EXPECT_EQ(info.num_classes, 2);
  EXPECT_EQ(info.class_names, (std::vector<std::string>{"cats", "dogs"}));  // label order, for model.json
  EXPECT_EQ(info.dtype, DType::kUInt8);
  EXPECT_EQ(info.sample_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(info.sample_bytes(), 3u * 32 * 32);
  EXPECT_EQ(info.mean, (std::vector<float>{0.485f, 0.456f, 0.406f}));
  EXPECT_EQ(info.std, (std::vector<float>{0.229f, 0.224f, 0.225f}));
  for (uint64_t i = 0; i < info.size; ++i) {
    int64_t label = -1;
    const std::vector<uint8_t> px = sample(*d, i, 0, &label);
    EXPECT_EQ(label, i < 3 ? 0 : 1);
    std::set<uint8_t> values(px.begin(), px.end());
    EXPECT_GT(values.size(), 10u) << "sample " << i << " looks blank";
  }
  EXPECT_TRUE(d->skipped().empty());
  EXPECT_EQ(wire_dtype(folder_options(dir.path())), DType::kUInt8);
}

TEST(ImageFolder, SamePrngKeyGivesTheSameBytesOtherKeysOthers) {
  TempDir dir;
  make_folder(dir.path());
  auto a = make_dataset(folder_options(dir.path(), "decode,random_resized_crop(24),hflip,color_jitter(0.4,0.4,0.4,0.1),rotation(20)"));
  auto b = make_dataset(folder_options(dir.path(), "decode,random_resized_crop(24),hflip,color_jitter(0.4,0.4,0.4,0.1),rotation(20)"));
  for (uint64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(sample(*a, i, 2), sample(*b, i, 2)) << i;
    EXPECT_EQ(sample(*a, i, 2), sample(*a, i, 2)) << i;
    EXPECT_NE(sample(*a, i, 2), sample(*a, i, 3)) << "epoch must change the augmentation of " << i;
  }
  DataOptions other = folder_options(dir.path(), "decode,random_resized_crop(24),hflip,color_jitter(0.4,0.4,0.4,0.1),rotation(20)");
  other.seed = 4;
  EXPECT_NE(sample(*make_dataset(other), 0, 2), sample(*a, 0, 2));
}

TEST(ImageFolder, EvalPipelineIsDeterministicAcrossEpochs) {
  TempDir dir;
  make_folder(dir.path());
  DataOptions opts = folder_options(dir.path(), "");
  opts.split = "test";
  opts.image_size = 28;  // resize(32), center_crop(28)
  auto d = make_dataset(opts);
  EXPECT_EQ(d->info().sample_shape, (std::vector<int64_t>{3, 28, 28}));
  EXPECT_EQ(sample(*d, 4, 0), sample(*d, 4, 7));
}

TEST(ImageFolder, FingerprintCoversFileNamesSizesAndPipeline) {
  TempDir dir;
  make_folder(dir.path());
  const std::string base = make_dataset(folder_options(dir.path()))->info().fingerprint;
  EXPECT_EQ(make_dataset(folder_options(dir.path()))->info().fingerprint, base);
  EXPECT_NE(make_dataset(folder_options(dir.path(), "decode,random_resized_crop(32)"))->info().fingerprint, base);
  fs::rename(dir.path() / "dogs" / "z.jpeg", dir.path() / "dogs" / "w.jpeg");
  const std::string renamed = make_dataset(folder_options(dir.path()))->info().fingerprint;
  EXPECT_NE(renamed, base);
  write_bytes(dir.path() / "dogs" / "w.jpeg", encode_jpeg(gradient_image(64, 48, 3, 6), 50));  // same name, new size
  EXPECT_NE(make_dataset(folder_options(dir.path()))->info().fingerprint, renamed);
  // the same files elsewhere: the same fingerprint (workers mount data at their own paths)
  TempDir other;
  make_folder(other.path());
  fs::rename(other.path() / "dogs" / "z.jpeg", other.path() / "dogs" / "w.jpeg");
  fs::copy_file(dir.path() / "dogs" / "w.jpeg", other.path() / "dogs" / "w.jpeg", fs::copy_options::overwrite_existing);
  EXPECT_EQ(make_dataset(folder_options(other.path()))->info().fingerprint,
            make_dataset(folder_options(dir.path()))->info().fingerprint);
}

TEST(ImageFolder, DatasetSizeTakesAnEvenlySpreadSubset) {
  TempDir dir;
  make_folder(dir.path());
  DataOptions opts = folder_options(dir.path());
  opts.dataset_size = 3;
  auto d = make_dataset(opts);
  EXPECT_EQ(d->info().size, 3u);
  int64_t first = -1, last = -1;
  sample(*d, 0, 0, &first);
  sample(*d, 2, 0, &last);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(last, 1);
  opts.dataset_size = 7;
  EXPECT_NE(config_error(opts).find("exceeds the 6 samples"), std::string::npos);
}

TEST(ImageFolder, BatchesAreUint8OrConvertedToFloat) {
  TempDir dir;
  make_folder(dir.path());
  auto d = make_dataset(folder_options(dir.path()));
  BatchRequest request{5, 1, {0, 3, 5}};
  const Batch u8 = BatchMaker(d, nullptr).make(request);
  EXPECT_EQ(u8.dtype, DType::kUInt8);
  EXPECT_EQ(u8.shape, (std::vector<int64_t>{3, 3, 32, 32}));
  EXPECT_EQ(u8.labels, (std::vector<int64_t>{0, 1, 1}));
  const Batch f32 = BatchMaker(d, nullptr, DType::kFloat32).make(request);
  ASSERT_EQ(f32.data.size(), u8.data.size() * 4);
  const auto* bytes = reinterpret_cast<const uint8_t*>(u8.data.data());
  const auto* floats = reinterpret_cast<const float*>(f32.data.data());
  for (size_t i = 0; i < u8.data.size(); ++i) ASSERT_FLOAT_EQ(floats[i], bytes[i] / 255.0f);
  const Batch bf16 = BatchMaker(d, nullptr, DType::kBFloat16).make(request);
  EXPECT_EQ(bf16.data.size(), u8.data.size() * 2);
}

TEST(ImageFolder, PoolThreadsMakeTheSameBatchAsOneThread) {
  TempDir dir;
  make_folder(dir.path());
  auto d = make_dataset(folder_options(dir.path(), "decode,random_resized_crop(40),hflip,color_jitter(0.3,0.3,0.3,0.05)"));
  ThreadPool pool(3);
  BatchMaker maker(d, &pool);
  for (uint32_t epoch = 0; epoch < 3; ++epoch) {
    BatchRequest request{epoch, epoch, {5, 4, 3, 2, 1, 0, 1, 3}};
    std::promise<Batch> result;
    maker.make_async(request, [&](Batch b) { result.set_value(std::move(b)); },
                     [&](std::exception_ptr e) { result.set_exception(e); });
    const Batch pooled = result.get_future().get();
    const Batch single = maker.make(request);
    EXPECT_TRUE(pooled.data == single.data) << "epoch " << epoch;
    EXPECT_EQ(pooled.labels, single.labels);
  }
}

TEST(ImageFolder, MissingRootsAndChannelsAreNamed) {
  DataOptions opts;
  opts.data = "imagefolder:/nonexistent/tandem-images";
  EXPECT_NE(config_error(opts).find("/nonexistent/tandem-images does not exist"), std::string::npos);
  TempDir root;
  opts.data = "imagefolder";
  opts.sagemaker_root = root.str();
  opts.channel = "training";
  EXPECT_NE(config_error(opts).find(root.str() + "/input/data/training"), std::string::npos);
  fs::create_directories(root.path() / "input" / "data" / "training");
  EXPECT_NE(config_error(opts).find("has no class folders"), std::string::npos);
  make_folder(root.path() / "input" / "data" / "training");
  EXPECT_EQ(make_dataset(opts)->info().size, 6u);  // the channel is the default PATH
}

TEST(ImageFolderBadData, EmptyClassFolderFailsOrIsListedUnderSkip) {
  TempDir dir;
  make_folder(dir.path());
  fs::create_directories(dir.path() / "birds");
  DataOptions opts = folder_options(dir.path());
  const std::string error = config_error(opts);
  EXPECT_NE(error.find(dir.str() + "/birds is an empty class folder"), std::string::npos) << error;
  opts.on_bad_sample = "skip";
  auto d = make_dataset(opts);
  EXPECT_EQ(d->info().num_classes, 3);  // birds keeps its label, 0: cats are 1, dogs 2
  int64_t label = -1;
  sample(*d, 5, 0, &label);
  EXPECT_EQ(label, 2);
  ASSERT_EQ(d->skipped().size(), 1u);
  EXPECT_NE(d->skipped()[0].find("birds: empty class folder"), std::string::npos);
  EXPECT_EQ(d->skipped_count(), 0u);
}

TEST(ImageFolderBadData, UndecodableFileFailsNamingThePath) {
  TempDir dir;
  make_folder(dir.path());
  write_bytes(dir.path() / "cats" / "b.jpg", {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
  const std::string error = config_error(folder_options(dir.path()), 1);
  EXPECT_NE(error.find(dir.str() + "/cats/b.jpg: not a decodable image"), std::string::npos) << error;
  EXPECT_NE(error.find("not a JPEG or PNG"), std::string::npos) << error;
  EXPECT_NE(error.find("--on-bad-sample skip"), std::string::npos) << error;
}

TEST(ImageFolderBadData, SkipSubstitutesTheNextGoodSampleAndRecordsIt) {
  TempDir dir;
  make_folder(dir.path());
  const std::vector<uint8_t> jpeg = encode_jpeg(gradient_image(60, 80, 3, 1));
  write_bytes(dir.path() / "cats" / "b.jpg", std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() / 3));
  write_bytes(dir.path() / "cats" / "sub" / "c.jpg", {});  // empty file, the next index
  DataOptions opts = folder_options(dir.path(), "decode,resize(16,16)");  // decodes every row: truncation shows
  opts.on_bad_sample = "skip";
  auto d = make_dataset(opts);
  // index 1 (b.jpg) and 2 (c.jpg) are bad: both become dogs/x.png (index 3), with its label
  int64_t label = -1;
  const std::vector<uint8_t> substitute = sample(*d, 1, 0, &label);
  EXPECT_EQ(label, 1);
  EXPECT_EQ(substitute, sample(*d, 3, 0));
  EXPECT_EQ(sample(*d, 2, 0), sample(*d, 3, 0));
  const std::vector<std::string> skipped = d->skipped();
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find("cats/b.jpg: not a decodable image: corrupt JPEG"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("cats/sub/c.jpg: not a decodable image"), std::string::npos) << skipped[1];
  EXPECT_EQ(d->skipped_count(), 3u);  // b, c (from index 1), then c again (index 2)
}

TEST(ImageFolderBadData, ImagesOverTheMaxPixelsFailNamingTheFileAndTheFlag) {
  // Headers that declare 100000 x 100000 (in under 100 bytes) and 40000 x 40000 pixels, and a
  // JPEG that declares 60000 x 60000: before the limit, std::bad_alloc (no file named) or
  // a 4.8 GB allocation first.
  TempDir dir;
  make_folder(dir.path());
  write_bytes(dir.path() / "cats" / "b.jpg", jpeg_declaring(60000, 60000));
  write_bytes(dir.path() / "dogs" / "x.png", png_declaring(100000, 100000));
  write_bytes(dir.path() / "dogs" / "y.png", png_declaring(40000, 40000));
  for (const char* pipeline : {"decode,random_resized_crop(32),hflip", "decode,center_crop(32)"}) {
    const DataOptions opts = folder_options(dir.path(), pipeline);
    for (const auto& [index, name, size] : {std::tuple{1, "cats/b.jpg", "60000 x 60000"},
                                            std::tuple{3, "dogs/x.png", "100000 x 100000"},
                                            std::tuple{4, "dogs/y.png", "40000 x 40000"}}) {
      const std::string error = config_error(opts, index);
      EXPECT_NE(error.find(dir.str() + "/" + name + ": the header declares a " + size + " image"), std::string::npos)
          << error;
      EXPECT_NE(error.find("more than --max-image-pixels 89478485"), std::string::npos) << error;
      EXPECT_NE(error.find("--on-bad-sample skip"), std::string::npos) << error;
    }
  }
  // Under skip: substituted by the next good file and listed; a raised limit lets the
  // 40000 x 40000 header through to the decoder, which finds its data missing.
  DataOptions opts = folder_options(dir.path(), "decode,resize(16,16)");  // no random draw: the substitute shows
  opts.on_bad_sample = "skip";
  auto d = make_dataset(opts);
  int64_t label = -1;
  EXPECT_EQ(sample(*d, 3, 0, &label), sample(*d, 5, 0));  // x.png and y.png -> z.jpeg
  EXPECT_EQ(label, 1);
  const std::vector<std::string> skipped = d->skipped();
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find("dogs/x.png: the header declares a 100000 x 100000 image (10000000000 pixels)"),
            std::string::npos)
      << skipped[0];
  opts.max_image_pixels = 1600000000;
  EXPECT_NE(make_dataset(opts)->info().fingerprint, d->info().fingerprint)
      << "under skip the limit decides which files serve";
  opts.on_bad_sample = "fail";
  const std::string error = config_error(opts, 4);
  EXPECT_NE(error.find("dogs/y.png: not a decodable image: corrupt PNG"), std::string::npos) << error;
}

TEST(ImageFolderBadData, SymlinkLoopsAreNamedAsSuch) {
  TempDir dir;
  make_folder(dir.path());
  fs::create_directory_symlink("..", dir.path() / "cats" / "up");  // cats/up/cats/up/... for ever
  std::string error = config_error(folder_options(dir.path()));
  EXPECT_NE(error.find("a symbolic link loop at " + dir.str() + "/cats/up "), std::string::npos) << error;
  EXPECT_NE(error.find("ELOOP"), std::string::npos) << error;
  EXPECT_EQ(error.find("permissions"), std::string::npos) << error;
  fs::remove(dir.path() / "cats" / "up");
  fs::create_symlink("self.jpg", dir.path() / "dogs" / "self.jpg");  // a link to itself
  error = config_error(folder_options(dir.path()));
  EXPECT_NE(error.find("a symbolic link loop at " + dir.str() + "/dogs/self.jpg "), std::string::npos) << error;
  fs::remove(dir.path() / "dogs" / "self.jpg");
  fs::create_directory_symlink("cats", dir.path() / "felines");  // a second name is no loop
  EXPECT_EQ(make_dataset(folder_options(dir.path()))->info().num_classes, 3);
}

TEST(ImageFolderBadData, SkipGivesUpWhenNothingDecodes) {
  TempDir dir;
  write_bytes(dir.path() / "a" / "1.jpg", {'x'});
  write_bytes(dir.path() / "b" / "2.png", {'y'});
  DataOptions opts = folder_options(dir.path());
  opts.on_bad_sample = "skip";
  auto d = make_dataset(opts);
  std::vector<uint8_t> out(d->info().sample_bytes());
  EXPECT_THROW(d->produce(0, 0, std::as_writable_bytes(std::span<uint8_t>(out))), DataError);
}

TEST(ImageFolderBadData, FileChangedAfterIndexingIsReported) {
  TempDir dir;
  make_folder(dir.path());
  auto d = make_dataset(folder_options(dir.path()));
  write_bytes(dir.path() / "dogs" / "x.png", {'s', 'h', 'o', 'r', 't'});
  fs::remove(dir.path() / "dogs" / "y.png");
  std::vector<uint8_t> out(d->info().sample_bytes());
  try {
    d->produce(3, 0, std::as_writable_bytes(std::span<uint8_t>(out)));
    FAIL() << "a changed file was used";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("x.png: changed since it was indexed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(d->produce(4, 0, std::as_writable_bytes(std::span<uint8_t>(out))), DataError);  // y.png: cannot open
}

}  // namespace
}  // namespace tandem::data
