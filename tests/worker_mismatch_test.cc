// A data worker that serves other data than the trainer expects is refused with the
// settings that differ named (workers send what their fingerprint is made from), not two
// hashes: the descriptions compared field by field, and a real worker on loopback.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "process_helpers.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"

namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;
using tandem::data::describe_difference;

TEST(WorkerMismatch, DescriptionsAreComparedSettingBySetting) {
  const std::string ours = "synthetic/v1 seed=0 size=10000 image=32 classes=10";
  EXPECT_EQ(describe_difference("synthetic/v1 seed=0 size=10000 image=64 classes=10", ours),
            "image size 64, this trainer expects 32 (--image-size)");
  EXPECT_EQ(describe_difference("synthetic/v1 seed=7 size=500 image=32 classes=10", ours),
            "seed 7, this trainer expects 0 (--seed); samples per epoch 500, this trainer expects 10000 "
            "(--dataset-size)");
  EXPECT_EQ(describe_difference("mnist/v1 images=train-images-idx3-ubyte:47040016 n=60000", ours),
            "dataset mnist/v1, this trainer expects synthetic/v1 (--data)")
      << "another kind of dataset: its settings are not comparable";
  EXPECT_EQ(describe_difference("mnist/v1 images=my images:16 n=1 seed=0", "mnist/v1 images=my images:16 n=1 seed=1"),
            "seed 0, this trainer expects 1 (--seed)")
      << "a file name with a space stays one value";
  EXPECT_EQ(describe_difference("synthetic/v1 seed=0 size=10000 image=32", ours),
            "classes (none), this trainer expects 10 (--num-classes)");
  EXPECT_EQ(describe_difference("", ours), "") << "a worker of an older tandem says nothing: the hashes are named";
  const std::string forged = "synthetic/v1 seed=\x1b[2J" + std::string(5000, '9') + " size=10000 image=32 classes=10";
  const std::string shown = describe_difference(forged, ours);
  EXPECT_EQ(shown.find('\x1b'), std::string::npos) << shown;
  EXPECT_LT(shown.size(), 400u) << shown;
}

TEST(WorkerMismatch, ATrainerNamesTheImageSizeARealWorkerServes) {
  const fs::path dir = fresh_dir("mismatch");
  Worker worker = start_worker("--threads 1 --idle-timeout 60 --data synthetic --image-size 64 --dataset-size 256",
                               dir / "worker.log");
  ASSERT_GT(worker.port, 0) << slurp(dir / "worker.log");
  const int code = run_tandem("trainer --data synthetic --image-size 32 --dataset-size 256 --local-workers 0 "
                              "--steps 2 --batch-size 8 --connect-timeout 60 --workers " + worker.target() +
                                  " --sagemaker-root " + (dir / "none").string(),
                              dir / "trainer.log", 120);
  const std::string log = slurp(dir / "trainer.log");
  EXPECT_EQ(code, 3) << log;
  EXPECT_NE(log.find("data worker " + worker.target() + " ("), std::string::npos) << log;
  EXPECT_NE(log.find(") serves image size 64, this trainer expects 32 (--image-size): give every host the same data "
                     "settings"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("fingerprint"), std::string::npos) << "no hashes when the worker says what differs:\n" << log;
}

}  // namespace
