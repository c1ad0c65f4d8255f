// Data only where it is needed: a trainer host without a copy of the data (a SageMaker
// channel sent to the data group only) learns the dataset from its workers, with real
// `tandem worker` and `tandem trainer` processes on loopback.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <png.h>

#include "image_fixtures.h"
#include "process_helpers.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace tandem::testing;
using namespace tandem::data::testing;

// Two classes of small images.
fs::path make_folder(const fs::path& root) {
  for (int i = 0; i < 4; ++i) {
    // Names built by append: GCC 12 warns wrongly (-Wrestrict) about "c" + to_string(i).
    const std::string n = std::to_string(i);
    write_bytes(root / "cats" / std::string("c").append(n).append(".jpg"), encode_jpeg(gradient_image(40, 48, 3, i)));
    write_bytes(root / "dogs" / std::string("d").append(n).append(".png"),
                encode_png(gradient_image(36, 36, 3, 10 + i), PNG_FORMAT_RGB));
  }
  return root;
}

std::string worker_args(const fs::path& data, int crop) {
  return "--threads 1 --idle-timeout 60 --data imagefolder:" + data.string() + " --pipeline 'decode,random_resized_crop(" +
         std::to_string(crop) + "),hflip'";
}

// The trainer's SageMaker root has no input/data/training channel.
std::string trainer_args(const fs::path& dir, const std::string& workers) {
  fs::create_directories(dir / "trainer-root");
  return "trainer --data imagefolder --sagemaker-root " + (dir / "trainer-root").string() + " --workers " + workers +
         " --steps 3 --batch-size 2 --connect-timeout 30 --summary-json " + (dir / "s.json").string();
}

TEST(DataPlacement, ATrainerWithoutTheDataLearnsItFromItsWorkers) {
  const fs::path dir = fresh_dir("learn-dataset");
  const fs::path data = make_folder(dir / "data");
  Worker worker = start_worker(worker_args(data, 32), dir / "worker.log");
  ASSERT_GT(worker.port, 0) << slurp(dir / "worker.log");
  const int code = run_tandem(trainer_args(dir, worker.target()), dir / "trainer.log", 120);
  const std::string log = slurp(dir / "trainer.log");
  ASSERT_EQ(code, 0) << log;
  EXPECT_NE(log.find("no copy of --data imagefolder on this host"), std::string::npos) << log;
  EXPECT_NE(log.find("dataset learnt from data worker"), std::string::npos) << log;
  EXPECT_NE(log.find("2 classes"), std::string::npos) << log;
  EXPECT_NE(log.find("0 local preprocessing threads"), std::string::npos) << log;
  const auto summary = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_EQ(summary["steps"], 3);
  ASSERT_EQ(summary["workers"].size(), 1u) << "no local source: nothing to preprocess with";
  EXPECT_EQ(summary["workers"][0]["batches"], 3);
  EXPECT_EQ(wait_exit(worker.child, 20s), 0) << "released at the end";
  // The class names came with the dataset's description: the saved model says which
  // output is which folder.
  const auto model = nlohmann::json::parse(slurp(dir / "trainer-root/model/model.json"));
  EXPECT_EQ(model["classes"], nlohmann::json({"cats", "dogs"})) << model.dump(2);
}

TEST(DataPlacement, TheSavedModelNamesTheClassFoldersInLabelOrder) {
  // Folders made out of order; labels follow the byte-wise sort ('B' < 'a').
  const fs::path dir = fresh_dir("class-names");
  for (const char* name : {"zebra", "ant", "Bee"}) {
    write_bytes(dir / "data" / name / "1.jpg", encode_jpeg(gradient_image(40, 48, 3, name[0])));
  }
  const int code = run_tandem("trainer --data imagefolder:" + (dir / "data").string() +
                                  " --image-size 32 --local-workers 1 --steps 2 --batch-size 2 --sagemaker-root " +
                                  dir.string(),
                              dir / "trainer.log", 120);
  ASSERT_EQ(code, 0) << slurp(dir / "trainer.log");
  const auto model = nlohmann::json::parse(slurp(dir / "model/model.json"));
  EXPECT_EQ(model["classes"], nlohmann::json({"Bee", "ant", "zebra"})) << model.dump(2);
  EXPECT_EQ(model["num_classes"], 3);
}

TEST(DataPlacement, WorkersThatDisagreeWithEachOtherAreRefused) {
  const fs::path dir = fresh_dir("learn-disagree");
  const fs::path data = make_folder(dir / "data");
  Worker w1 = start_worker(worker_args(data, 32), dir / "w1.log");
  Worker w2 = start_worker(worker_args(data, 24), dir / "w2.log");
  ASSERT_GT(w1.port, 0) << slurp(dir / "w1.log");
  ASSERT_GT(w2.port, 0) << slurp(dir / "w2.log");
  const std::string workers = w1.target() + "," + w2.target();
  EXPECT_EQ(run_tandem(trainer_args(dir, workers), dir / "trainer.log", 120), 3);  // configuration
  const std::string log = slurp(dir / "trainer.log");
  // The trainer learnt the dataset from one worker and names what the other does differently,
  // from the pipeline's first step that differs.
  EXPECT_TRUE(log.find("pipeline ...,random_resized_crop(size=24,") != std::string::npos ||
              log.find("pipeline ...,random_resized_crop(size=32,") != std::string::npos)
      << log;
  EXPECT_NE(log.find("(--pipeline, or --image-size and --split, which choose the default one)"), std::string::npos)
      << log;
  EXPECT_NE(log.find("give every host the same data settings"), std::string::npos) << log;
}

// Asking for local preprocessing without the data is the channel's own clear error.
TEST(DataPlacement, LocalPreprocessingWithoutTheDataIsAnError) {
  const fs::path dir = fresh_dir("learn-local");
  const fs::path data = make_folder(dir / "data");
  Worker worker = start_worker(worker_args(data, 32), dir / "worker.log");
  ASSERT_GT(worker.port, 0) << slurp(dir / "worker.log");
  EXPECT_EQ(run_tandem(trainer_args(dir, worker.target()) + " --local-workers 1",
                       dir / "trainer.log", 60),
            3);  // configuration
  const std::string log = slurp(dir / "trainer.log");
  EXPECT_NE(log.find("channel 'train'"), std::string::npos) << log;
  EXPECT_NE(log.find("which does not exist"), std::string::npos) << log;
}

// What a peer says about its dataset is checked before a model is built on it.
TEST(DataPlacement, APeersDescriptionIsChecked) {
  tandem::data::DatasetInfo good;
  good.name = "imagefolder";
  good.size = 8;
  good.fingerprint = "abc";
  good.sample_shape = {3, 32, 32};
  good.num_classes = 2;
  good.mean = {0.5f, 0.5f, 0.5f};
  good.std = {0.2f, 0.2f, 0.2f};
  EXPECT_EQ(tandem::data::info_problem(good), "");
  auto problem = [&](auto change) {
    tandem::data::DatasetInfo d = good;
    change(d);
    return tandem::data::info_problem(d);
  };
  EXPECT_NE(problem([](auto& d) { d.num_classes = 0; }).find("older tandem"), std::string::npos);
  EXPECT_NE(problem([](auto& d) { d.sample_shape = {3, 32}; }).find("not [C, H, W]"), std::string::npos);
  EXPECT_NE(problem([](auto& d) { d.sample_shape = {3, 0, 32}; }).find("dimension of 0"), std::string::npos);
  EXPECT_NE(problem([](auto& d) { d.size = 0; }).find("size 0"), std::string::npos);
  EXPECT_NE(problem([](auto& d) { d.std = {0.2f, 0.f, 0.2f}; }).find("std"), std::string::npos);
  EXPECT_NE(problem([](auto& d) { d.mean = {0.5f}; }).find("channels"), std::string::npos);
  EXPECT_NE(problem([](auto& d) { d.fingerprint.clear(); }).find("fingerprint"), std::string::npos);
  EXPECT_EQ(problem([](auto& d) { d.class_names = {"cats", "dogs"}; }), "");
  EXPECT_NE(problem([](auto& d) { d.class_names = {"cats"}; }).find("1 class names for 2 classes"),
            std::string::npos);
  EXPECT_NE(problem([](auto& d) { d.class_names = {"cats", std::string(300, 'x')}; }).find("class name of 300 bytes"),
            std::string::npos);
}

TEST(DataPlacement, GeneratedDataIsEverywhereFilesOnlyWhereTheyAre) {
  tandem::DataOptions opts;
  opts.sagemaker_root = fresh_dir("here").string();
  EXPECT_TRUE(tandem::data::dataset_is_here(opts));  // synthetic
  opts.data = "imagefolder";
  EXPECT_FALSE(tandem::data::dataset_is_here(opts));
  fs::create_directories(opts.sagemaker_root + "/input/data/train");
  EXPECT_TRUE(tandem::data::dataset_is_here(opts));
  opts.data = "mnist:/no/such/dir";
  EXPECT_FALSE(tandem::data::dataset_is_here(opts));
}

}  // namespace
