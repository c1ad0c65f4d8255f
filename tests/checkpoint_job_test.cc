// A checkpoint knows the job that wrote it (issue 48): the real `tandem trainer`, run
// again on the same root, says when its checkpoint is already at the last step (and still
// writes the model and a summary), and refuses a checkpoint another job wrote (another
// model) unless --resume-any.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "process_helpers.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::fresh_dir;
using testing::run_capture;

std::string trainer(const fs::path& root, int steps, const std::string& model) {
  return "trainer --sagemaker-root " + root.string() + " --data synthetic --image-size 16 --batch-size 8" +
         " --local-workers 1 --train-threads 1 --checkpoint-every 2 --model " + model + " --steps " +
         std::to_string(steps);
}

TEST(CheckpointJob, ACompleteCheckpointIsSaidAndAnotherJobsIsRefused) {
  const fs::path dir = fresh_dir("tandem-checkpoint-job");
  const fs::path root = dir / "root";
  fs::create_directories(root);
  // 4 steps, a checkpoint every 2: ckpt-2 (the last step writes the model, not a checkpoint).
  auto first = run_capture(trainer(root, 4, "small_cnn"), dir / "first.log", 120);
  ASSERT_EQ(first.code, 0) << first.out;
  ASSERT_TRUE(fs::exists(root / "checkpoints" / "ckpt-000000002.pt.json"));
  EXPECT_NE(testing::slurp(root / "checkpoints" / "ckpt-000000002.pt.json").find("\"model\":\"small_cnn\""),
            std::string::npos);
  fs::remove(root / "model" / "model.pt");
  fs::remove(root / "output" / "data" / "summary.json");

  // The same job to step 2: its checkpoint is already there.
  auto again = run_capture(trainer(root, 2, "small_cnn"), dir / "again.log", 120);
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("checkpoint " + (root / "checkpoints" / "ckpt-000000002.pt").string() +
                              " is at step 2, the last of this run's 2: training is complete"),
            std::string::npos)
      << again.out;
  EXPECT_TRUE(fs::exists(root / "model" / "model.pt")) << "the model is written anyway";
  EXPECT_TRUE(fs::exists(root / "output" / "data" / "summary.json")) << "and a summary";

  auto other = run_capture(trainer(root, 4, "resnet18"), dir / "other.log", 120);
  EXPECT_EQ(other.code, 3) << other.out;
  EXPECT_NE(other.out.find("was written by another job (model small_cnn"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("--resume-any"), std::string::npos) << other.out;
}

}  // namespace
}  // namespace tandem
