// A checkpoint knows the job that wrote it (issue 48): the real `tandem trainer`, run
// again on the same root, says when its checkpoint is already at the last step (and still
// writes the model and a summary), and refuses a checkpoint another job wrote (another
// model) unless --resume-any.
#include <sys/resource.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
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
  EXPECT_NE(other.out.find("was written by another run: its model \"small_cnn\" (this run: \"resnet18\")"),
            std::string::npos)
      << other.out;
  EXPECT_NE(other.out.find("--resume-any"), std::string::npos) << other.out;
  EXPECT_EQ(other.out.find("INTERNAL ASSERT"), std::string::npos) << "never fed to the optimizer";

  // Another learning rate is another run: refused by name, unless --resume-any.
  auto lr = run_capture(trainer(root, 4, "small_cnn") + " --lr 0.2", dir / "lr.log", 120);
  EXPECT_EQ(lr.code, 3) << lr.out;
  EXPECT_NE(lr.out.find("its lr 0.05 (this run: 0.2)"), std::string::npos) << lr.out;
  auto any = run_capture(trainer(root, 4, "small_cnn") + " --lr 0.2 --resume-any", dir / "any.log", 120);
  EXPECT_EQ(any.code, 0) << any.out;
  EXPECT_NE(any.out.find("resumed from"), std::string::npos) << any.out;
}

// One live run per output folder: a second trainer on the folder of a running one is
// refused by name (exit 3) and the first is unaffected; a lock its holder left behind
// (a pid that no longer runs) is taken over, and said so.
TEST(CheckpointJob, TwoRunsInOneFolderAreRefusedAndAStaleLockIsTakenOver) {
  const fs::path dir = fresh_dir("tandem-output-lock");
  const fs::path root = dir / "root";
  fs::create_directories(root);
  testing::Child first = testing::spawn(trainer(root, 100000, "small_cnn") + " --job-name job-a", dir / "first.log");
  ASSERT_TRUE(testing::wait_for_text(dir / "first.log", "rank 0/1", std::chrono::seconds(120)))
      << testing::slurp(dir / "first.log");
  ASSERT_TRUE(fs::exists(root / ".tandem-lock"));
  auto second = run_capture(trainer(root, 4, "small_cnn") + " --job-name job-b", dir / "second.log", 120);
  EXPECT_EQ(second.code, 3) << second.out;
  EXPECT_NE(second.out.find("output folder " + root.string() + " is in use by another run (host "),
            std::string::npos)
      << second.out;
  EXPECT_NE(second.out.find("job 'job-a'"), std::string::npos) << second.out;
  EXPECT_FALSE(fs::exists(root / "output" / "data" / "summary.json")) << "the refused run wrote into the first's folder";
  EXPECT_FALSE(fs::exists(root / "output" / "failure")) << "the refused run wrote into the first's folder";
  kill(first.pid, SIGTERM);
  EXPECT_EQ(testing::wait_exit(first, std::chrono::seconds(120)), 75) << testing::slurp(dir / "first.log");
  EXPECT_FALSE(fs::exists(root / ".tandem-lock")) << "released at the end";

  // A holder that died without releasing it: pid 2^22 - 1 does not run here.
  fs::remove_all(root / "checkpoints");  // the first run's, far past this one's 4 steps
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::ofstream(root / ".tandem-lock") << "{\"host\":\"" << host << "\",\"pid\":4194303,\"job\":\"job-a\","
                                          "\"started\":1}\n";
  auto third = run_capture(trainer(root, 4, "small_cnn") + " --job-name job-a", dir / "third.log", 120);
  EXPECT_EQ(third.code, 0) << third.out;
  EXPECT_NE(third.out.find("taking over the lock of output folder " + root.string()), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("pid 4194303 no longer runs on this host"), std::string::npos) << third.out;
  fs::remove_all(dir);
}

// A disk full for a while at a periodic checkpoint (the hostile run's: exit 1 although
// space came back): the run says so and trains on, and the next checkpoint, once the disk
// takes it again, is written; the run ends 0 with its model. The disk is made full with
// RLIMIT_FSIZE (prlimit), lifted from outside while the run goes on.
TEST(CheckpointJob, ACheckpointOnAFullDiskIsSaidAndTrainingGoesOn) {
  const fs::path dir = fresh_dir("tandem-checkpoint-full");
  const fs::path root = dir / "root";
  fs::create_directories(root);
  const std::string args = "trainer --sagemaker-root " + root.string() +
                           " --data synthetic --image-size 16 --batch-size 8 --local-workers 1 --train-threads 1"
                           " --model small_cnn --steps 60 --checkpoint-every 10 --emulate-step-ms 100";
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit full{40000, RLIM_INFINITY};  // a checkpoint is larger; the log and metrics are not
    setrlimit(RLIMIT_FSIZE, &full);
    const std::string cmd = std::string("exec ") + TANDEM_BINARY + " " + args + " > " + (dir / "run.log").string() + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  testing::Child run = pid;
  ASSERT_TRUE(testing::wait_for_text(dir / "run.log", "could not write the checkpoint of step 10", std::chrono::seconds(120)))
      << testing::slurp(dir / "run.log");
  ASSERT_EQ(std::system(("prlimit --pid " + std::to_string(run.pid) + " --fsize=unlimited").c_str()), 0);
  EXPECT_EQ(testing::wait_exit(run, std::chrono::seconds(120)), 0) << testing::slurp(dir / "run.log");
  const std::string log = testing::slurp(dir / "run.log");
  EXPECT_NE(log.find("training goes on"), std::string::npos) << log;
  EXPECT_TRUE(fs::exists(root / "model/model.pt")) << log;
  bool later = false;
  for (const auto& e : fs::directory_iterator(root / "checkpoints")) later = later || e.path().extension() == ".pt";
  EXPECT_TRUE(later) << "no checkpoint written once the disk took them again: " << log;
  fs::remove_all(dir);
}

// A run that fails leaves its summary (the failure and its code) and report.html, and
// the report of a job run again under its name shows every run (runs.jsonl).
TEST(CheckpointJob, AFailedRunLeavesItsSummaryAndTheReportShowsEveryRun) {
  const fs::path dir = fresh_dir("tandem-failed-run");
  const fs::path root = dir / "root";
  fs::create_directories(root);
  const std::string missing = (dir / "no-such-images").string();
  auto failed = run_capture("trainer --sagemaker-root " + root.string() + " --data imagefolder:" + missing +
                                " --model small_cnn --steps 4 --local-workers 1 --train-threads 1",
                            dir / "failed.log", 120);
  EXPECT_EQ(failed.code, 3) << failed.out;
  const std::string summary = testing::slurp(root / "output" / "data" / "summary.json");
  EXPECT_NE(summary.find("\"failure\""), std::string::npos) << summary;
  EXPECT_NE(summary.find("no-such-images"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"exit_code\": 3"), std::string::npos) << summary;
  EXPECT_NE(testing::slurp(root / "output" / "data" / "report.html").find("<b>yes</b> (exit 3)"), std::string::npos);
  auto good = run_capture(trainer(root, 2, "small_cnn"), dir / "good.log", 120);
  ASSERT_EQ(good.code, 0) << good.out;
  const std::string runs = testing::slurp(root / "output" / "data" / "runs.jsonl");
  EXPECT_EQ(std::count(runs.begin(), runs.end(), '\n'), 2) << runs;
  const std::string report = testing::slurp(root / "output" / "data" / "report.html");
  EXPECT_NE(report.find("Every run of this job"), std::string::npos);
  EXPECT_NE(report.find("failed (exit 3)"), std::string::npos);
  EXPECT_NE(report.find("finished"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem
