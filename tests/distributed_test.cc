// Data parallelism and checkpoints end to end: real `tandem` processes, Gloo over
// loopback. The comparison of final models loads them with LibTorch.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "process_helpers.h"
#include "tandem/common/exit_codes.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using namespace tandem::testing;

int run(const std::string& args, const fs::path& log, int timeout_s = 240) { return run_tandem(args, log, timeout_s); }

nlohmann::json summary(const fs::path& p) { return nlohmann::json::parse(slurp(p)); }

// The tensors of a model.pt that holds a state dict (what tandem writes for built-ins).
std::vector<torch::Tensor> load_params(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<torch::Tensor> out;
  for (const auto& item : torch::pickle_load(bytes).toGenericDict()) out.push_back(item.value().toTensor());
  return out;
}

TEST(DataParallel, TwoRanksStayIdenticalAndMatchOneProcessWithTheSameGlobalBatch) {
  const fs::path dir = fresh_dir("ranks");
  const std::string common = " --worker-hosts 1 --steps 12 --log-every 4 --lr 0.02 --model small_cnn";
  ASSERT_EQ(run("simulate --procs-per-host 2 --batch-size 8" + common + " --run-dir " + (dir / "two").string() +
                    " --summary-json " + (dir / "two.json").string(),
                dir / "two.log"),
            0)
      << slurp(dir / "two.log");
  ASSERT_EQ(run("simulate --procs-per-host 1 --batch-size 16" + common + " --run-dir " + (dir / "one").string() +
                    " --summary-json " + (dir / "one.json").string(),
                dir / "one.log"),
            0)
      << slurp(dir / "one.log");
  const auto two = summary(dir / "two.json"), one = summary(dir / "one.json");
  ASSERT_EQ(two["world_size"], 2);
  ASSERT_EQ(two["param_checksums"].size(), 2u);
  EXPECT_EQ(two["param_checksums"][0], two["param_checksums"][1]) << "ranks diverged";
  const auto a = load_params(two["model_file"]), b = load_params(one["model_file"]);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-4, 1e-5)) << "parameter " << i << " differs by "
                                                          << (a[i] - b[i]).abs().max().item<float>();
  }
}

TEST(DataParallel, TwoSimulatedTrainerHostsTrainResnet18WithGloo) {
  const fs::path dir = fresh_dir("hosts");
  ASSERT_EQ(run("simulate --trainer-hosts 2 --worker-hosts 1 --model resnet18 --steps 4 --batch-size 8 --log-every 2"
                " --run-dir " + (dir / "run").string() + " --summary-json " + (dir / "s.json").string(),
                dir / "run.log"),
            0)
      << slurp(dir / "run.log");
  const auto s = summary(dir / "s.json");
  EXPECT_EQ(s["world_size"], 2);
  EXPECT_EQ(s["steps"], 4);
  ASSERT_EQ(s["param_checksums"].size(), 2u);
  EXPECT_EQ(s["param_checksums"][0], s["param_checksums"][1]);
}

// A trainer on its own SageMaker root (created here: tandem writes checkpoints and the
// model only under a root that exists).
std::string trainer_args(const fs::path& root, int steps, const std::string& extra = "") {
  fs::create_directories(root);
  return "trainer --local-workers 1 --train-threads 1 --batch-size 16 --log-every 5 --steps " + std::to_string(steps) +
         " --sagemaker-root " + root.string() + " --summary-json " + (root / "s.json").string() + extra;
}

// A trainer of `model` with `flags`, stopped by SIGTERM after step 10 of 40 and run
// again, gives the losses of the run that was not stopped, bit for bit.
void expect_sigterm_then_resume_reproduces_the_losses(const std::string& model, const std::string& flags,
                                                      const std::string& name) {
  const fs::path dir = fresh_dir("resume-" + name);
  const std::string extra = " --model " + model + flags;
  ASSERT_EQ(run(trainer_args(dir / "straight", 40, extra), dir / "straight.log"), 0) << slurp(dir / "straight.log");
  const auto straight = summary(dir / "straight/s.json")["losses"].get<std::vector<double>>();
  ASSERT_EQ(straight.size(), 40u);

  const fs::path root = dir / "stopped";
  Child p = spawn(trainer_args(root, 40, extra), dir / "first.log");
  ASSERT_TRUE(wait_for_text(dir / "first.log", "step=10 ", 60s)) << slurp(dir / "first.log");
  kill(p.pid, SIGTERM);
  ASSERT_EQ(wait_exit(p, 30s), tandem::kExitInterrupted) << slurp(dir / "first.log");
  const auto first = summary(root / "s.json");
  const auto before = first["losses"].get<std::vector<double>>();
  ASSERT_TRUE(first["interrupted"].get<bool>());
  ASSERT_GE(before.size(), 10u);
  ASSERT_LT(before.size(), 40u) << "SIGTERM came too late to test a resume";
  for (size_t i = 0; i < before.size(); ++i) ASSERT_EQ(before[i], straight[i]) << "step " << i;

  ASSERT_EQ(run(trainer_args(root, 40, extra), dir / "second.log"), 0) << slurp(dir / "second.log");
  const auto second = summary(root / "s.json");
  EXPECT_EQ(second["start_step"].get<size_t>(), before.size());
  const auto after = second["losses"].get<std::vector<double>>();
  ASSERT_EQ(before.size() + after.size(), 40u);
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i], straight[before.size() + i]) << "step " << before.size() + i << ": not bit-exact";
  }
  EXPECT_TRUE(fs::exists(root / "model/model.pt"));
  EXPECT_TRUE(fs::exists(root / "model/model.json"));
}

// A built-in and a TorchScript model (tests/fixtures/models/tiny_net.pt) alike.
TEST(Checkpoints, SigtermThenResumeReproducesTheUninterruptedLosses) {
  for (const std::string model : {"small_cnn", TANDEM_FIXTURES "/models/tiny_net.pt"}) {
    SCOPED_TRACE(model);
    expect_sigterm_then_resume_reproduces_the_losses(model, "", fs::path(model).stem().string());
  }
}

// Mixing is drawn from (seed, step, rank): the resumed run mixes its batches as the
// uninterrupted one did.
TEST(Checkpoints, SigtermThenResumeReproducesTheLossesWithMixupCutmixAndSmoothing) {
  expect_sigterm_then_resume_reproduces_the_losses(
      "small_cnn", " --mixup 0.2 --cutmix 1.0 --label-smoothing 0.1 --seed 3", "mixing");
}

TEST(Checkpoints, ACorruptCheckpointIsReportedAndSkipped) {
  const fs::path root = fresh_dir("corrupt");
  ASSERT_EQ(run(trainer_args(root, 10, " --checkpoint-every 4 --keep-checkpoints 5"), root / "a.log"), 0)
      << slurp(root / "a.log");
  const fs::path newest = root / "checkpoints/ckpt-000000008.pt";
  ASSERT_TRUE(fs::exists(newest));
  ASSERT_TRUE(fs::exists(root / "checkpoints/ckpt-000000004.pt"));
  fs::resize_file(newest, fs::file_size(newest) / 2);  // a torn write
  ASSERT_EQ(run(trainer_args(root, 12), root / "b.log"), 0) << slurp(root / "b.log");
  EXPECT_NE(slurp(root / "b.log").find("ckpt-000000008.pt is corrupt"), std::string::npos) << slurp(root / "b.log");
  EXPECT_EQ(summary(root / "s.json")["start_step"], 4);
}

}  // namespace

namespace {

TEST(Training, Bf16AutocastAndChannelsLastTrain) {
  const fs::path root = fresh_dir("amp");
  ASSERT_EQ(run(trainer_args(root, 6, " --amp bf16 --channels-last --model resnet18 --optimizer adamw --lr 0.001"
                                      " --lr-schedule cosine --warmup-steps 2 --clip-grad-norm 1.0"),
                root / "amp.log"),
            0)
      << slurp(root / "amp.log");
  const auto s = summary(root / "s.json");
  EXPECT_EQ(s["steps"], 6);
  for (double loss : s["losses"].get<std::vector<double>>()) EXPECT_TRUE(std::isfinite(loss));
  // What the steps computed with, seen in the tensors: the flags took effect.
  EXPECT_EQ(s["compute_dtype"], "bfloat16");
  EXPECT_EQ(s["memory_layout"], "channels_last");
  // And without them, the same model trains in float32 on contiguous tensors.
  const fs::path other = root / "plain";
  ASSERT_EQ(run(trainer_args(other, 2, " --model resnet18 --optimizer adamw --lr 0.001"), other / "plain.log"), 0)
      << slurp(other / "plain.log");
  const auto plain = summary(other / "s.json");
  EXPECT_EQ(plain["compute_dtype"], "float32");
  EXPECT_EQ(plain["memory_layout"], "contiguous");
}

// One rank with --single-rank-group forms a real (Gloo) process group and allreduces each
// step's gradient buckets during backward, the path NCCL takes on a one-GPU machine
// (scripts/gpu-experiment's step 6); divided by a world of 1, nothing changes.
TEST(DataParallel, ASingleRankGroupAllreducesEveryStepAndChangesNothing) {
  const fs::path root = fresh_dir("single-rank-group");
  const std::string group_flags = " --single-rank-group --dist-timeout 60 --master-port " + std::to_string(free_port());
  ASSERT_EQ(run(trainer_args(root / "group", 4, group_flags), root / "group.log"), 0) << slurp(root / "group.log");
  ASSERT_EQ(run(trainer_args(root / "alone", 4), root / "alone.log"), 0) << slurp(root / "alone.log");
  const auto group = summary(root / "group" / "s.json"), alone = summary(root / "alone" / "s.json");
  EXPECT_EQ(group["world_size"], 1);
  const int64_t buckets = group["grad_buckets"].get<int64_t>();
  EXPECT_GE(buckets, 1) << "no gradient buckets: no allreduce ran";
  EXPECT_EQ(group["grad_buckets_overlapped"].get<int64_t>(), 4 * buckets) << "every bucket of every step, in backward";
  EXPECT_EQ(alone["grad_buckets"], 0);
  EXPECT_EQ(group["losses"], alone["losses"]);
  EXPECT_EQ(group["param_checksums"], alone["param_checksums"]);
}

}  // namespace

namespace {

// Debian's dataset-fashion-mnist (scripts/setup installs it): real data, real evaluation.
TEST(Training, FashionMnistLearnsAndIsEvaluatedOnItsTestSplit) {
  const std::string path = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(path)) GTEST_SKIP() << "install dataset-fashion-mnist (scripts/setup and scripts/test-cuda do)";
  const std::string data = "mnist:" + path;
  const fs::path root = fresh_dir("fashion");
  ASSERT_EQ(run(trainer_args(root, 120, " --data " + data + " --eval-data " + data +
                                        " --model small_cnn --optimizer adam --lr 0.003 --eval-every 60"),
                root / "run.log"),
            0)
      << slurp(root / "run.log");
  const auto s = summary(root / "s.json");
  EXPECT_GT(s["eval_accuracy"].get<double>(), 0.6) << s.dump(2);
  ASSERT_EQ(s["eval_history"].size(), 2u);
  EXPECT_EQ(s["skipped_samples"], 0);
  EXPECT_NE(slurp(root / "run.log").find("step=120 eval_accuracy="), std::string::npos);
}

}  // namespace

namespace {

// A rank whose peers never come gives up at --dist-timeout with one error naming where it
// waited and the fix; as the store's server (rank 0) and as a client with no server (rank 1).
TEST(Rendezvous, APeerThatNeverComesEndsAtTheTimeoutNamingTheFix) {
  for (const char* rank : {"0", "1"}) {
    SCOPED_TRACE(std::string("rank ") + rank);
    const fs::path dir = fresh_dir(std::string("rendezvous-timeout-") + rank);
    const std::string port = std::to_string(free_port());
    setenv("WORLD_SIZE", "2", 1);
    setenv("RANK", rank, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", port.c_str(), 1);
    const auto start = std::chrono::steady_clock::now();
    Child p = spawn("trainer --local-workers 1 --train-threads 1 --steps 10 --dist-timeout 3", dir / "rank.log");
    for (const char* v : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(v);
    EXPECT_EQ(wait_exit(p, 60s), 5) << slurp(dir / "rank.log");
    EXPECT_LT(std::chrono::steady_clock::now() - start, 40s);
    const std::string log = slurp(dir / "rank.log");
    EXPECT_NE(log.find(std::string("rank ") + rank + " could not meet the others at 127.0.0.1:" + port + " within 3 s"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("raise --dist-timeout"), std::string::npos) << log;
  }
}

}  // namespace
