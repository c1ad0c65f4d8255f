// What a run leaves a user: the trained model where the summary says (simulate, and a
// trainer run by hand outside SageMaker), checkpoints only of steps that were completed,
// and a quick, clear end when a cluster cannot start. Real `tandem` processes.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "process_helpers.h"
#include "tandem/common/text.h"

namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;

// The tensors of a model.pt holding a state dict (what tandem writes for built-ins), as
// torch.load would read them.
std::vector<torch::Tensor> load_state_dict(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<torch::Tensor> out;
  for (const auto& item : torch::pickle_load(bytes).toGenericDict()) out.push_back(item.value().toTensor());
  return out;
}

// Runs `tandem ARGS` in the working directory `cwd` under a deadline; the exit code, or
// -1 if it was killed.
int run_in(const fs::path& cwd, const std::string& args, const fs::path& log, int timeout_s) {
  const std::string cmd = "cd " + cwd.string() + " && timeout -s KILL " + std::to_string(timeout_s) + " " +
                          TANDEM_BINARY + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<fs::path> files_named(const fs::path& dir, const std::string& extension) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.path().extension() == extension) out.push_back(e.path());
  }
  return out;
}

// "1 threads" was in the logs; every count in a message goes through counted().
TEST(Text, CountedNounsAgreeWithTheirNumber) {
  EXPECT_EQ(tandem::counted(0, "thread"), "0 threads");
  EXPECT_EQ(tandem::counted(1, "thread"), "1 thread");
  EXPECT_EQ(tandem::counted(4, "thread"), "4 threads");
  EXPECT_EQ(tandem::counted(1, "trainer process", "trainer processes"), "1 trainer process");
  EXPECT_EQ(tandem::counted(2, "trainer process", "trainer processes"), "2 trainer processes");
  EXPECT_EQ(tandem::counted(1, "GPU"), "1 GPU");
}

// Issue 21, item 5: both workers exit at once on a typo in --data; the trainer used to
// wait for them the whole --connect-timeout. The deadline (60 s) is half of that.
TEST(RunResults, SimulateWithAMissingDataPathEndsAtOnceWithTheWorkersReason) {
  const fs::path dir = fresh_dir("simulate-typo");
  const int code = run_tandem("simulate --data imagefolder:/nonexistent-tandem-data --steps 5 --connect-timeout 120"
                              " --run-dir " + (dir / "run").string(),
                              dir / "sim.log", 60);
  const std::string out = slurp(dir / "sim.log");
  ASSERT_EQ(code, 1) << "-1 means it still waited after 60 s:\n" << out;
  EXPECT_NE(out.find("every worker host failed, so the cluster was stopped: algo-1, algo-3: --data "
                     "imagefolder:/nonexistent-tandem-data: /nonexistent-tandem-data does not exist"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("no summary from"), std::string::npos) << "one message, not a missing file's: " << out;
}

// Issue 21, item 12: simulate used to delete the model its summary names.
TEST(RunResults, SimulateKeepsTheTrainedModelTheSummaryNames) {
  const fs::path dir = fresh_dir("simulate-model");
  ASSERT_EQ(run_tandem("simulate --worker-hosts 1 --steps 10 --log-every 5 --checkpoint-every 5 --summary-json " +
                           (dir / "s.json").string(),
                       dir / "sim.log", 240),
            0)
      << slurp(dir / "sim.log");
  const std::string out = slurp(dir / "sim.log");
  const auto summary = nlohmann::json::parse(slurp(dir / "s.json"));
  const fs::path model = summary["model_file"].get<std::string>();
  ASSERT_TRUE(fs::exists(model)) << out;
  EXPECT_TRUE(fs::exists(model.parent_path() / "model.json"));
  EXPECT_FALSE(load_state_dict(model).empty());
  EXPECT_NE(out.find("model       " + model.string() + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("trained model: " + model.string()), std::string::npos) << out;
  // What only a resume needs goes: the run ended.
  EXPECT_TRUE(files_named(model.parent_path().parent_path() / "checkpoints", ".pt").empty()) << out;
  const fs::path run = model.parent_path().parent_path().parent_path();  // <run>/algo-2/model/model.pt
  if (run.filename().string().rfind("tandem-sim-", 0) == 0) fs::remove_all(run);
}

// Issue 21, item 13: `tandem trainer` by hand, outside SageMaker, used to keep nothing.
TEST(RunResults, ATrainerRunByHandKeepsItsSummaryAndModelInTheWorkingDirectory) {
  const fs::path dir = fresh_dir("by-hand");
  const std::string args = "trainer --local-workers 1 --train-threads 1 --log-every 3 --sagemaker-root " +
                           (dir / "absent").string();
  ASSERT_EQ(run_in(dir, args + " --steps 6", dir / "run.log", 120), 0) << slurp(dir / "run.log");
  const std::string log = slurp(dir / "run.log");
  const auto summaries = files_named(dir / "tandem-output", ".json");
  const auto it = std::find_if(summaries.begin(), summaries.end(),
                               [](const fs::path& p) { return p.filename() == "summary.json"; });
  ASSERT_NE(it, summaries.end()) << log;
  const fs::path run = it->parent_path().parent_path().parent_path();  // <run>/output/data/summary.json
  EXPECT_EQ(run.parent_path(), dir / "tandem-output");
  EXPECT_EQ(run.filename().string().rfind("run-", 0), 0u) << run;
  EXPECT_NE(log.find("no SageMaker root at " + (dir / "absent").string() + ": this run's summary, checkpoints and "
                     "model go to " + run.string()),
            std::string::npos)
      << log;
  const auto summary = nlohmann::json::parse(slurp(*it));
  EXPECT_EQ(summary["model_file"], (run / "model/model.pt").string());
  EXPECT_FALSE(load_state_dict(run / "model/model.pt").empty());
  EXPECT_NE(log.find("summary in " + it->string()), std::string::npos) << log;
  EXPECT_NE(log.find("trained model in " + (run / "model/model.pt").string()), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir / "absent")) << "the SageMaker root is not made up";
  EXPECT_NE(log.find("0 data workers, 1 local preprocessing thread, 1 torch thread\n"), std::string::npos) << log;
  EXPECT_NE(log.find("training finished: 6 steps, "), std::string::npos) << log;

  // A named job keeps one folder, so that its restart resumes there.
  ASSERT_EQ(run_in(dir, args + " --job-name nightly/7 --steps 3", dir / "named.log", 120), 0) << slurp(dir / "named.log");
  EXPECT_TRUE(fs::exists(dir / "tandem-output/nightly-7/model/model.pt")) << slurp(dir / "named.log");
}

// Issue 21, item 10: a run that failed before its first step wrote ckpt-000000000.pt,
// which then refused the next run in the same root with another model.
TEST(RunResults, ARunThatFailsBeforeItsFirstStepLeavesNoCheckpoint) {
  const fs::path dir = fresh_dir("fail-before-step");
  for (const char* cls : {"a", "b"}) {
    fs::create_directories(dir / "data" / cls);
    std::ofstream(dir / "data" / cls / "x.png") << "not an image";  // indexed, but no batch can be made
  }
  fs::create_directories(dir / "root");
  const std::string root = " --local-workers 1 --train-threads 1 --sagemaker-root " + (dir / "root").string();
  EXPECT_EQ(run_tandem("trainer --data imagefolder:" + (dir / "data").string() +
                           " --image-size 32 --batch-size 2 --steps 5 --checkpoint-every 1" + root,
                       dir / "a.log", 120),
            4)  // bad data
      << slurp(dir / "a.log");
  EXPECT_NE(slurp(dir / "a.log").find("training failed before its first step: no checkpoint written"),
            std::string::npos)
      << slurp(dir / "a.log");
  EXPECT_TRUE(files_named(dir / "root", ".pt").empty()) << slurp(dir / "a.log");
  EXPECT_EQ(run_tandem("trainer --model mnist_cnn --steps 3" + root, dir / "b.log", 120), 0) << slurp(dir / "b.log");
}

// --checkpoint-every auto: the first checkpoint, 20 steps in, measures what one costs and
// sets Young's interval from the job's spot interruption rate; the summary keeps the
// cost and the start-up (the plan's spot terms).
TEST(RunResults, CheckpointEveryAutoMeasuresTheFirstAndSetsTheInterval) {
  const fs::path dir = fresh_dir("checkpoint-auto");
  const std::string root = " --sagemaker-root " + (dir / "R").string();
  fs::create_directories(dir / "R");
  ASSERT_EQ(run_tandem("trainer --local-workers 1 --train-threads 1 --batch-size 8 --image-size 16 --steps 30 "
                       "--log-every 10 --checkpoint-every auto" + root,
                       dir / "a.log", 120),
            0)
      << slurp(dir / "a.log");
  const std::string log = slurp(dir / "a.log");
  EXPECT_NE(log.find("checkpoint at step 20 in"), std::string::npos) << log;
  EXPECT_NE(log.find("--checkpoint-every auto: a checkpoint took"), std::string::npos) << log;
  const auto summary = nlohmann::json::parse(slurp(dir / "R/output/data/summary.json"));
  EXPECT_EQ(summary["checkpoints"]["count"], 1) << summary.dump(2);
  EXPECT_GT(summary["checkpoints"]["seconds"].get<double>(), 0);
  EXPECT_GT(summary["startup_seconds"].get<double>(), 0);
  EXPECT_LT(summary["startup_seconds"].get<double>(), 120);
  fs::remove_all(dir);
}

}  // namespace
