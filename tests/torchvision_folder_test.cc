// A torchvision ImageFolder given as python:FILE:NAME is made natively (issue 52): its
// sample list, classes and transform (a Compose of steps tandem has) become tandem's own
// stored images, byte for byte what --data imagefolder with the equivalent --pipeline
// makes; a transform tandem has no step for, or an argument it would approximate, leaves
// the dataset to its own Python code and says why. Needs /usr/bin/python3 with
// torchvision (Debian's python3-torchvision).
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "captured_log.h"
#include "image_fixtures.h"
#include "process_helpers.h"
#include "python_fixture.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::data {
namespace {

namespace fs = std::filesystem;
using ::tandem::testing::CapturedLog;
using testing::encode_jpeg;
using testing::encode_png;
using testing::gradient_image;
using testing::write_bytes;

bool have_torchvision() {
  static const bool yes = std::system("/usr/bin/python3 -c 'import torchvision' > /dev/null 2>&1") == 0;
  return yes;
}

#define REQUIRE_TORCHVISION() \
  if (!have_torchvision()) GTEST_SKIP() << "/usr/bin/python3 has no torchvision (python3-torchvision)"

const std::string kFolders = ::tandem::testing::kPythonFixtures + "/torchvision_folders.py";
const std::string kImagenet = "0.485,0.456,0.406,0.229,0.224,0.225";

fs::path make_folder(const std::string& name) {
  const fs::path root = ::tandem::testing::fresh_dir(name) / "train";
  write_bytes(root / "cats" / "a.jpg", encode_jpeg(gradient_image(40, 50, 3, 1)));
  write_bytes(root / "cats" / "b.jpeg", encode_jpeg(gradient_image(30, 60, 3, 2)));
  write_bytes(root / "dogs" / "c.png", encode_png(gradient_image(40, 40, 3, 4), PNG_FORMAT_RGB));
  write_bytes(root / "dogs" / "d.jpg", encode_jpeg(gradient_image(64, 48, 1, 5)));
  return root;
}

DataOptions folder_data(const fs::path& root, const std::string& recipe, const std::string& name = "Folder") {
  DataOptions d = ::tandem::testing::python_data(name, "{\"root\": \"" + root.string() + "\", \"recipe\": \"" + recipe + "\"}",
                                       1, kFolders);
  if (name != "Folder") d.data_args = "{\"root\": \"" + root.string() + "\"}";
  d.seed = 3;
  return d;
}

DataOptions image_folder(const fs::path& root, const std::string& pipeline) {
  DataOptions d;
  d.data = "imagefolder:" + root.string();
  d.pipeline = pipeline;
  d.seed = 3;
  return d;
}

void expect_same_samples(const Dataset& a, const Dataset& b) {
  ASSERT_EQ(a.info().size, b.info().size);
  EXPECT_EQ(a.info().num_classes, b.info().num_classes);
  EXPECT_EQ(a.info().class_names, b.info().class_names);
  EXPECT_EQ(a.info().sample_shape, b.info().sample_shape);
  EXPECT_EQ(a.info().mean, b.info().mean);
  EXPECT_EQ(a.info().std, b.info().std);
  for (uint32_t epoch = 0; epoch < 2; ++epoch) {
    for (uint64_t i = 0; i < a.info().size; ++i) {
      int64_t la = -1, lb = -2;
      EXPECT_EQ(::tandem::testing::sample(a, i, epoch, &la), ::tandem::testing::sample(b, i, epoch, &lb)) << "sample " << i;
      EXPECT_EQ(la, lb) << "sample " << i;
    }
  }
}

// Each recipe against imagefolder with the pipeline it stands for: the same samples,
// labels, classes (ImageFolder's: sorted folder names) and normalisation.
TEST(TorchvisionFolder, AnImageFolderAndItsComposeAreMadeNativelyAsTandemsOwnSteps) {
  REQUIRE_TORCHVISION();
  const fs::path root = make_folder("tv-native");
  const std::vector<std::pair<std::string, std::string>> recipes = {
      {"train", "decode(channels=3,scaled=0),random_resized_crop(24),hflip,"
                "color_jitter(brightness=0.4,contrast=0.4,saturation=0.4),normalize(" + kImagenet + ")"},
      {"eval", "decode(channels=3,scaled=0),resize(28),center_crop(24),normalize(" + kImagenet + ")"},
      {"apply", "decode(channels=3,scaled=0),random_resized_crop(24,scale=(0.2,1.0)),"
                "color_jitter(brightness=0.4,contrast=0.4,saturation=0.4,hue=0.1,p=0.8),"
                "gaussian_blur(3,sigma=(0.1,2.0),p=0.5),normalize(0,0,0,1,1,1)"},
      {"cifar", "decode(channels=3,scaled=0),random_crop(24,padding=4),hflip,normalize(" + kImagenet + ")"},
      {"gray", "decode(channels=3,scaled=0),resize(28,width=30),random_grayscale(0.5),vflip,"
               "random_crop(24,padding=(1,2),padding_mode=reflect),normalize(0,0,0,1,1,1)"},
      {"choice", R"j(["decode(channels=3,scaled=0)", "random_resized_crop(24)",
                     {"op": "random_choice", "steps": ["hflip(1)", "random_grayscale(1)"], "p": [0.75, 0.25]},
                     {"op": "random_order", "steps": ["color_jitter(brightness=0.2)", "vflip",
                                                      "gaussian_blur(3)"]},
                     "normalize(0,0,0,1,1,1)"])j"},
  };
  for (const auto& [recipe, pipeline] : recipes) {
    SCOPED_TRACE(recipe);
    CapturedLog log;
    const auto native = make_dataset(folder_data(root, recipe));
    const auto folder = make_dataset(image_folder(root, pipeline));
    EXPECT_EQ(native->info().class_names, (std::vector<std::string>{"cats", "dogs"}));
    EXPECT_EQ(native->info().size, 4u);
    EXPECT_NE(log.out.str().find("is a torchvision image folder of 4 images in 2 classes, made natively"),
              std::string::npos)
        << log.out.str();
    expect_same_samples(*native, *folder);
    EXPECT_NE(native->info().fingerprint, folder->info().fingerprint);
  }
}

// The same recipe written with transforms.v2 is made as its v1 twin (where this Python's
// torchvision has v2: Debian bookworm's 0.14 has not, trixie's 0.21 has).
TEST(TorchvisionFolder, AV2ComposeIsMadeAsItsV1Twin) {
  REQUIRE_TORCHVISION();
  if (std::system("/usr/bin/python3 -c 'import torchvision.transforms.v2' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "this torchvision has no transforms.v2";
  }
  const fs::path root = make_folder("tv-v2");
  const auto v2 = make_dataset(folder_data(root, "", "V2Folder"));
  const auto v1 = make_dataset(folder_data(root, "train"));
  expect_same_samples(*v2, *v1);
}

// A transform of the user's own before ToTensor splits the pipeline: tandem's steps up to
// it in C++, it and what follows it up to ToTensor in the dataset's own Python, on the image
// as torchvision gives it (a PIL image, a uint8 tensor), seeded per sample: byte for byte
// what imagefolder with the same steps and a python() step doing the same makes. The log
// says which transforms run in Python and why.
TEST(TorchvisionFolder, ATransformOfTheUsersOwnRunsInPythonAfterTandemsSteps) {
  REQUIRE_TORCHVISION();
  const fs::path root = make_folder("tv-split");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"split", "decode(channels=3,scaled=0),random_resized_crop(24),hflip,python(" + kFolders + ":posterize),normalize(" +
                    kImagenet + ")",
       "transforms 2-2 (Lambda) run in Python after tandem's steps, because transform 2 (Lambda): tandem has no such "
       "step"},
      {"own", "decode(channels=3,scaled=0),resize(28),center_crop(24),python(" + kFolders +
                  ":invert_then_flip),normalize(0,0,0,1,1,1)",
       "transforms 2-3 (MaybeInvert, RandomHorizontalFlip) run in Python"},
  };
  for (const auto& [recipe, pipeline, said] : cases) {
    SCOPED_TRACE(recipe);
    CapturedLog log;
    const auto native = make_dataset(folder_data(root, recipe));
    const auto folder = make_dataset(image_folder(root, pipeline));
    EXPECT_NE(log.out.str().find("made natively"), std::string::npos) << log.out.str();
    EXPECT_NE(log.out.str().find(said), std::string::npos) << log.out.str();
    expect_same_samples(*native, *folder);
  }
}

// Not made natively, and said why, never approximated: a transform of the user's own after
// ToTensor, an interpolation tandem lacks, a subclass's own __getitem__. Their own Python
// code makes them, and their float32 images (ToTensor's) are served as they are.
TEST(TorchvisionFolder, WhatTandemWouldApproximateIsLeftToPythonAndSaid) {
  REQUIRE_TORCHVISION();
  const fs::path root = make_folder("tv-refused");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"Folder", "lambda", "transform 3 (Lambda): tandem has no such step, and it works on a float tensor"},
      {"Folder", "bicubic", "transform 0 (Resize): interpolation 'bicubic'"},
      {"Subclassed", "", "MyFolder has its own __getitem__"},
  };
  for (const auto& [name, recipe, why] : cases) {
    SCOPED_TRACE(name + " " + recipe);
    CapturedLog log;
    const auto python = make_dataset(folder_data(root, recipe, name));
    EXPECT_NE(log.out.str().find("made by its own Python code: not made natively: " + why), std::string::npos)
        << log.out.str();
    EXPECT_EQ(python->info().dtype, DType::kFloat32);
    EXPECT_EQ(python->info().sample_shape, (std::vector<int64_t>{3, 24, 24}));
    EXPECT_EQ(python->info().class_names, (std::vector<std::string>{"cats", "dogs"}));
    EXPECT_TRUE(python->info().mean.empty());
  }
}

// --python-native off: the same folder run by its own Python code, as any dataset is.
TEST(TorchvisionFolder, PythonNativeOffRunsItAsPython) {
  REQUIRE_TORCHVISION();
  const fs::path root = make_folder("tv-off");
  DataOptions d = folder_data(root, "eval");
  d.python_native = "off";
  CapturedLog log;
  const auto python = make_dataset(d);
  EXPECT_EQ(log.out.str().find("made natively"), std::string::npos) << log.out.str();
  EXPECT_EQ(python->info().dtype, DType::kFloat32);
  EXPECT_EQ(python->info().description.find("native="), std::string::npos) << python->info().description;
}

// A dataset of the user's own opts in with one line, `return tandem.Image(path), label`,
// and its transform as an attribute: the same samples as the ImageFolder made natively,
// a transform of its own run in Python after tandem's steps as for a folder; without a
// transform it is not made natively, and the error says what to add.
TEST(TorchvisionFolder, ADatasetReturningTandemImagesIsMadeNatively) {
  REQUIRE_TORCHVISION();
  const fs::path root = make_folder("tv-listed");
  for (const std::string recipe : {"train", "split"}) {
    SCOPED_TRACE(recipe);
    CapturedLog log;
    DataOptions listed = folder_data(root, recipe, "Listed");
    listed.data_args = "{\"root\": \"" + root.string() + "\", \"recipe\": \"" + recipe + "\"}";
    const auto native = make_dataset(listed);
    EXPECT_NE(log.out.str().find("is a dataset of tandem.Image files of 4 images in 2 classes, made natively"),
              std::string::npos)
        << log.out.str();
    EXPECT_NE(native->info().description.find("native=tandem-images/v1"), std::string::npos);
    expect_same_samples(*native, *make_dataset(folder_data(root, recipe)));
  }
  DataOptions bare = folder_data(root, "train", "Listed");
  bare.data_args = "{\"root\": \"" + root.string() + "\", \"transform\": false}";
  const std::string error = ::tandem::testing::start_error(bare);
  EXPECT_NE(error.find("not made natively: its samples are tandem.Image files but it has no `transform` attribute"),
            std::string::npos)
      << error;
}

// Samples with a tandem.Image beside fields of their own (the image as bytes, or as a
// path) cannot be listed: each sample's image bytes come with its fields and tandem decodes
// and augments them, keyed as a listed image is: the same images as the folder made natively.
TEST(TorchvisionFolder, TandemImagesSentWithEachSampleAreDecodedInCpp) {
  REQUIRE_TORCHVISION();
  const fs::path root = make_folder("tv-encoded");
  const auto folder = make_dataset(folder_data(root, "train"));
  for (const std::string bytes : {"true", "false"}) {
    SCOPED_TRACE("bytes " + bytes);
    CapturedLog log;
    DataOptions encoded = folder_data(root, "train", "Encoded");
    encoded.data_args = "{\"root\": \"" + root.string() + "\", \"bytes\": " + bytes + "}";
    const auto native = make_dataset(encoded);
    EXPECT_NE(log.out.str().find("returns tandem.Image: each image decoded and augmented in C++"), std::string::npos)
        << log.out.str();
    EXPECT_NE(native->info().description.find("native=tandem-images/v1 output=float32 pipeline="), std::string::npos);
    ASSERT_EQ(native->info().fields.size(), 3u);
    EXPECT_EQ(native->info().fields[2].name, "weight");
    expect_same_samples(*native, *folder);
    // A batch asks the processes for its samples at once: the same images.
    const Batch b = BatchMaker(native, nullptr).make(BatchRequest{0, 1, {3, 0, 2}});
    const size_t each = native->info().sample_bytes();
    for (size_t i = 0; i < 3; ++i) {
      const std::vector<std::byte> one = ::tandem::testing::sample(*folder, b.indices[i], 1);
      EXPECT_EQ(std::memcmp(b.data.data() + i * each, one.data(), each), 0) << "sample " << b.indices[i];
    }
  }
}

// Served by a data worker host to two ranks (tandem simulate): the worker makes it
// natively, training runs, and every image comes once per epoch (--audit-samples).
TEST(TorchvisionFolder, AWorkerServesItNativelyAndEverySampleComesOncePerEpoch) {
  REQUIRE_TORCHVISION();
  const fs::path root = make_folder("tv-served");
  for (int i = 0; i < 12; ++i) {
    write_bytes(root / (i % 2 ? "cats" : "dogs") / ("more-" + std::to_string(i) + ".jpg"),
                encode_jpeg(gradient_image(36 + i, 44, 3, 10 + i)));
  }
  const fs::path dir = root.parent_path();
  const std::string args = "{\"root\": \"" + root.string() + "\", \"recipe\": \"train\"}";
  const auto r = ::tandem::testing::run_capture(
      "simulate --procs-per-host 2 --worker-hosts 1 --python /usr/bin/python3 --data python:" + kFolders +
          ":Folder --data-args '" + args + "' --epochs 2 --batch-size 4 --audit-samples --run-dir " +
          (dir / "run").string() + " --summary-json " + (dir / "s.json").string(),
      dir / "run.log", 240);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("is a torchvision image folder of 16 images in 2 classes, made natively"), std::string::npos)
      << r.out;
  const auto s = nlohmann::json::parse(::tandem::testing::slurp(dir / "s.json"));
  const auto& a = s["sample_audit"];
  ASSERT_EQ(a["epochs"].size(), 2u) << a.dump(2);
  EXPECT_EQ(a["epochs"][0]["planned"], 16) << a.dump(2);
  EXPECT_EQ(a["missing"], 0) << a.dump(2);
  EXPECT_EQ(a["duplicated"], 0) << a.dump(2);
  // The summary says how the samples were made, and the plan from it says what that means.
  EXPECT_EQ(s["settings"]["made"], "natively in C++ (torchvision-folder/v1)") << s["settings"].dump(2);
  const auto plan = ::tandem::testing::run_capture("plan " + (dir / "s.json").string(), dir / "plan.log", 60);
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("The Python dataset was made natively in C++ (torchvision-folder/v1)"), std::string::npos)
      << plan.out;
}

}  // namespace
}  // namespace tandem::data
