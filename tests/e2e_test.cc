// End to end: the real `tandem` binary, real processes, loopback networking.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/common/exit_codes.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using namespace tandem::testing;

struct Result {
  int code = -1;
  std::string output;
};

// Runs `tandem ARGS` under a deadline; output is stdout and stderr together.
Result run(const std::string& args, const fs::path& dir, int timeout_s = 120) {
  const int code = run_tandem(args, dir / "run.log", timeout_s);
  return {code, slurp(dir / "run.log")};
}

TEST(EndToEnd, SimulateTrainsAHeterogeneousClusterAndEveryHostExitsZero) {
  const fs::path dir = fresh_dir("simulate");
  const Result r = run("simulate --steps 200 --log-every 50 --run-dir " + (dir / "run").string() + " --summary-json " +
                           (dir / "summary.json").string(),
                       dir, 300);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[algo-1]"), std::string::npos);
  EXPECT_NE(r.output.find("step=200 loss="), std::string::npos) << r.output;
  const auto summary = nlohmann::json::parse(slurp(dir / "summary.json"));
  EXPECT_EQ(summary["steps"], 200);
  EXPECT_EQ(summary["samples"], 200 * 64);
  EXPECT_LT(summary["final_loss"].get<double>(), 0.5 * summary["first_loss"].get<double>()) << summary.dump(2);
  ASSERT_EQ(summary["workers"].size(), 2u) << "two data workers, no local preprocessing by default";
  int batches = 0;
  for (const auto& w : summary["workers"]) {
    EXPECT_GT(w["batches"].get<int>(), 0) << w.dump();
    batches += w["batches"].get<int>();
  }
  EXPECT_EQ(batches, 200);
  for (const char* host : {"algo-1", "algo-2", "algo-3"}) {
    EXPECT_TRUE(fs::exists(dir / "run" / host / "input/config/resourceconfig.json")) << host;
  }
}

TEST(EndToEnd, SimulateFailsCleanlyWhenTheTrainerFails) {
  const fs::path dir = fresh_dir("simulate-fail");
  const auto start = std::chrono::steady_clock::now();
  const Result r = run("simulate --model no_such_model --run-dir " + (dir / "run").string(), dir, 120);
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s) << "workers must not wait for their idle timeout";
  EXPECT_NE(slurp(dir / "run/algo-2/output/failure").find("unknown --model 'no_such_model'"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("unknown --model"), std::string::npos);
}

TEST(EndToEnd, WorkersDoNotHangWhenTheTrainerIsKilled) {
  const fs::path dir = fresh_dir("trainer-killed");
  // The idle timeout runs from the worker's start until a trainer is served: long enough
  // for a trainer that starts slowly (LibTorch 2.6 with CUDA on a loaded machine), short
  // enough that the test shows the worker ending by itself once the trainer is gone.
  Worker worker = start_worker("--idle-timeout 30", dir / "worker.log");
  Child trainer = spawn("trainer --steps 100000 --log-every 5 --workers " + worker.target(), dir / "trainer.log");
  // A generous deadline: LibTorch 2.x starts slowly on a loaded 2-core machine.
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=5 ", 240s)) << slurp(dir / "trainer.log");
  kill(trainer.pid, SIGKILL);
  EXPECT_EQ(wait_exit(trainer, 10s), 128 + SIGKILL);
  EXPECT_EQ(wait_exit(worker.child, 90s), 5)  /* a peer failed */ << slurp(dir / "worker.log");
  EXPECT_NE(slurp(dir / "worker.log").find("--idle-timeout"), std::string::npos) << slurp(dir / "worker.log");
}

TEST(EndToEnd, SigtermStopsATrainerWhichReleasesItsWorkers) {
  const fs::path dir = fresh_dir("sigterm");
  Worker worker = start_worker("", dir / "worker.log");
  Child trainer = spawn("trainer --steps 100000 --log-every 5 --summary-json " + (dir / "s.json").string() +
                            " --workers " + worker.target(),
                        dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=5 ", 60s)) << slurp(dir / "trainer.log");
  kill(trainer.pid, SIGTERM);
  EXPECT_EQ(wait_exit(trainer, 20s), tandem::kExitInterrupted) << slurp(dir / "trainer.log");
  EXPECT_EQ(wait_exit(worker.child, 20s), 0) << slurp(dir / "worker.log");
  EXPECT_TRUE(nlohmann::json::parse(slurp(dir / "s.json"))["interrupted"].get<bool>());
}

// SIGTERM before a trainer released it: interrupted (75), so that a scheduler starts it
// again; with --drain it leaves the job on purpose (0).
TEST(EndToEnd, SigtermStopsAWorkerAsInterruptedAndADrainingOneAsDone) {
  const fs::path dir = fresh_dir("worker-sigterm");
  Worker worker = start_worker("", dir / "worker.log");
  kill(worker.child.pid, SIGTERM);
  EXPECT_EQ(wait_exit(worker.child, 10s), tandem::kExitInterrupted) << slurp(dir / "worker.log");
  Worker draining = start_worker("--drain", dir / "draining.log");
  kill(draining.child.pid, SIGTERM);
  EXPECT_EQ(wait_exit(draining.child, 10s), 0) << slurp(dir / "draining.log");
}

TEST(EndToEnd, FlagsBeatHyperparametersWhichBeatTheConfigFile) {
  const fs::path dir = fresh_dir("settings");
  fs::create_directories(dir / "root/input/config");
  std::ofstream(dir / "root/input/config/hyperparameters.json")
      << R"({"batch_size": "\"16\"", "steps": "9", "sagemaker_program": "train.py", "log-every": "1"})";
  std::ofstream(dir / "config.json") << R"({"steps": 7, "batch-size": 8, "dataset-size": 500, "seed": 3})";
  const Result r = run("trainer --local-workers 1 --sagemaker-root " + (dir / "root").string() + " --config " +
                           (dir / "config.json").string() + " --steps 4 --summary-json " + (dir / "s.json").string(),
                       dir);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto summary = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_EQ(summary["steps"], 4) << "the flag wins";
  EXPECT_EQ(summary["samples"], 4 * 16) << "hyperparameters.json beats the config file";
  EXPECT_NE(r.output.find("step=1 "), std::string::npos) << "log-every from hyperparameters.json";
}

// --epochs on two ranks: steps = epochs x floor(dataset / global batch), the summary
// states both, and the sample audit shows each epoch used every sample exactly once.
TEST(EndToEnd, EpochsBecomeStepsAndEachEpochUsesEverySampleOnce) {
  const fs::path dir = fresh_dir("epochs");
  const Result r = run("simulate --procs-per-host 2 --worker-hosts 1 --epochs 2 --dataset-size 96 --batch-size 8"
                       " --log-every 3 --audit-samples --run-dir " + (dir / "run").string() + " --summary-json " +
                           (dir / "s.json").string(),
                       dir, 240);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_EQ(s["steps_per_epoch"], 6) << "96 samples / (8 x 2 ranks)";
  EXPECT_EQ(s["steps"], 12);
  EXPECT_EQ(s["epochs"], 2.0);
  const auto& a = s["sample_audit"];
  ASSERT_EQ(a["epochs"].size(), 2u) << a.dump(2);
  EXPECT_EQ(a["epochs"][0]["planned"], 96) << a.dump(2);
  EXPECT_EQ(a["missing"], 0) << a.dump(2);
  EXPECT_EQ(a["duplicated"], 0) << a.dump(2);

  std::ofstream(dir / "config.json") << R"({"epochs": 3})";
  const Result both = run("trainer --local-workers 1 --steps 5 --config " + (dir / "config.json").string(), dir);
  EXPECT_EQ(both.code, 3);
  EXPECT_NE(both.output.find("both steps and epochs are set"), std::string::npos) << both.output;
}

// A checkpoint of 2 ranks resumed on 3 (480 samples, 8 a rank: 30 and 20 steps an
// epoch): step 37 is epoch 1, sample 112 on 2 ranks but sample 408 on 3, so positions
// 112..407 of epoch 1's order are never trained. The resume says so, naming both sizes,
// and the audit counts them missing instead of "missing 0".
TEST(EndToEnd, AResumeAtAnotherWorldSizeIsSaidAndItsSkippedSamplesAudited) {
  const fs::path dir = fresh_dir("resume-world");
  const std::string common = " --worker-hosts 1 --dataset-size 480 --batch-size 8 --image-size 16 --log-every 10"
                             " --audit-samples --run-dir " + (dir / "run").string() + " --summary-json ";
  const Result first = run("simulate --procs-per-host 2 --steps 38 --checkpoint-every 37" + common +
                               (dir / "a.json").string(), dir, 240);
  ASSERT_EQ(first.code, 0) << first.output;
  const Result second = run("simulate --procs-per-host 3 --epochs 2" + common + (dir / "b.json").string(), dir, 240);
  ASSERT_EQ(second.code, 0) << second.output;
  for (const char* part : {"at another world size", "2 ranks x 8 (global batch 16) at epoch 1, sample 112",
                           "3 ranks x 8 (global batch 24)", "samples 112-407 of epoch 1's order (296)",
                           "sample audit: 368 samples planned, 72 consumed: 296 missing"}) {
    EXPECT_NE(second.output.find(part), std::string::npos) << part << " not in:\n" << second.output;
  }
  const auto s = nlohmann::json::parse(slurp(dir / "b.json"));
  EXPECT_EQ(s["start_step"], 37);
  const auto& a = s["sample_audit"];
  ASSERT_EQ(a["epochs"].size(), 1u) << a.dump(2);
  EXPECT_EQ(a["epochs"][0]["consumed"], 72) << a.dump(2);
  EXPECT_EQ(a["missing"], 296) << a.dump(2);
  EXPECT_EQ(a["from"]["world"], 2) << a.dump(2);
}

TEST(EndToEnd, AnUnknownSettingIsOneClearError) {
  const fs::path dir = fresh_dir("unknown-setting");
  std::ofstream(dir / "config.json") << R"({"batch-sise": 8})";
  const Result r = run("trainer --local-workers 1 --config " + (dir / "config.json").string(), dir);
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.output.find("unknown setting 'batch-sise'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
}

TEST(EndToEnd, ABrokenResourceConfigStopsLaunchWithTheFileNamed) {
  const fs::path dir = fresh_dir("bad-resourceconfig");
  fs::create_directories(dir / "root/input/config");
  fs::create_directories(dir / "root/output");
  std::ofstream(dir / "root/input/config/resourceconfig.json") << R"({"current_host": "algo-1", "hosts": )";
  const Result r = run("launch --sagemaker-root " + (dir / "root").string(), dir, 30);
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.output.find("resourceconfig.json"), std::string::npos) << r.output;
  EXPECT_NE(slurp(dir / "root/output/failure").find("resourceconfig.json"), std::string::npos);
}

TEST(EndToEnd, InspectExplainsEveryHostOfTheExampleCluster) {
  const fs::path dir = fresh_dir("inspect");
  fs::create_directories(dir / "root/input/config");
  std::ofstream(dir / "root/input/config/resourceconfig.json")
      << R"({"current_group_name":"data_group","current_host":"algo-1","current_instance_type":"ml.c5.18xlarge",)"
      << R"("hosts":["algo-1","algo-2","algo-3"],"instance_groups":[{"instance_group_name":"data_group",)"
      << R"("instance_type":"ml.c5.18xlarge","hosts":["algo-3","algo-1"]},{"instance_group_name":"dnn_group",)"
      << R"("instance_type":"ml.p4d.24xlarge","hosts":["algo-2"]}],"network_interface_name":"eth0"})";
  for (const std::string host : {"algo-1", "algo-2", "algo-3"}) {
    const Result r = run("inspect --sagemaker-root " + (dir / "root").string() + " --current-host " + host, dir, 30);
    ASSERT_EQ(r.code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["current_host"], host);
    EXPECT_EQ(j["role"], host == "algo-2" ? "trainer" : "worker");
    EXPECT_EQ(j["worker_hosts"], nlohmann::json({"algo-1", "algo-3"}));
    if (host == "algo-2") {
      EXPECT_EQ(j["workers"], nlohmann::json({"algo-1:6000", "algo-3:6000"}));
    } else {
      EXPECT_EQ(j["worker_address"], host + ":6000");
      EXPECT_EQ(j["current_group"], "data_group");
    }
  }
}

}  // namespace
