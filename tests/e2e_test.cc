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

// 2 ranks stopped by SIGTERM mid-epoch (480 samples, 8 a rank: 30 steps an epoch), then
// resumed from a copy of that run on 3 ranks with 2 workers, and on 1 rank: each resume
// continues the epoch from the checkpoint's sample exactly. Across the two runs every
// sample of the 2 epochs is trained once, but for the resumed epoch's dropped tail
// (fewer than one global batch of the new geometry), which the audit counts.
void expect_exact_resume(const fs::path& dir, const std::string& name, const std::string& geometry, int world) {
  const std::string common = " --dataset-size 480 --batch-size 8 --image-size 16 --log-every 5 --epochs 2"
                             " --audit-samples --run-dir " + (dir / name).string() + " --summary-json ";
  fs::copy(dir / "first", dir / name, fs::copy_options::recursive);
  const Result r = run("simulate " + geometry + common + (dir / (name + ".json")).string(), dir, 240);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto a = nlohmann::json::parse(slurp(dir / "a.json"));
  const auto b = nlohmann::json::parse(slurp(dir / (name + ".json")));
  const int64_t step = a["steps"].get<int64_t>() + a["start_step"].get<int64_t>();
  EXPECT_EQ(b["start_step"], step) << b.dump(2);
  const uint64_t place = (static_cast<uint64_t>(step) % 30) * 16;  // in the first run's epoch
  const uint64_t global = 8 * static_cast<uint64_t>(world), tail = (480 - place) % global;
  const auto& audit = b["sample_audit"];
  EXPECT_EQ(audit["missing"], 0) << audit.dump(2);
  EXPECT_EQ(audit["duplicated"], 0) << audit.dump(2);
  EXPECT_EQ(audit["unplanned"], 0) << audit.dump(2);
  EXPECT_EQ(audit["dropped"], tail) << audit.dump(2);
  EXPECT_EQ(audit["planned"], audit["consumed"]) << audit.dump(2);
  // Both runs: every sample of the 2 epochs once, less the tail.
  EXPECT_EQ(a["sample_audit"]["consumed"].get<uint64_t>() + audit["consumed"].get<uint64_t>() + tail, 960u)
      << a["sample_audit"].dump(2) << audit.dump(2);
  EXPECT_EQ(b["steps"].get<uint64_t>(), (480 - place) / global + (step < 30 ? 480 / global : 0)) << b.dump(2);
  // The losses go on from where they were, not from an untrained model's.
  EXPECT_LT(b["first_loss"].get<double>(), a["first_loss"].get<double>()) << a.dump(2) << b.dump(2);
  if (world != 2) {
    for (const char* part : {"continues epoch", "from sample " , "exactly", "the learning rate stays as given"}) {
      EXPECT_NE(r.output.find(part), std::string::npos) << part << " not in:\n" << r.output;
    }
  }
}

TEST(EndToEnd, AResumeAtAnotherWorldSizeContinuesTheEpochExactly) {
  const fs::path dir = fresh_dir("resume-world");
  const std::string first = "simulate --procs-per-host 2 --worker-hosts 1 --dataset-size 480 --batch-size 8"
                            " --image-size 16 --log-every 5 --epochs 2 --emulate-step-ms 60 --audit-samples"
                            " --run-dir " + (dir / "first").string() + " --summary-json " + (dir / "a.json").string();
  Child p = spawn(first, dir / "first.log");
  ASSERT_TRUE(wait_for_text(dir / "first.log", "step=35 ", std::chrono::seconds(180))) << slurp(dir / "first.log");
  kill(p.pid, SIGTERM);
  ASSERT_EQ(wait_exit(p, std::chrono::seconds(60)), tandem::kExitInterrupted) << slurp(dir / "first.log");
  const auto a = nlohmann::json::parse(slurp(dir / "a.json"));
  ASSERT_LT(a["steps"].get<int64_t>(), 59) << "SIGTERM came too late to test a resume";
  EXPECT_EQ(a["sample_audit"]["missing"], 0) << a.dump(2);
  expect_exact_resume(dir, "three", "--procs-per-host 3 --worker-hosts 2", 3);
  expect_exact_resume(dir, "one", "--procs-per-host 1 --worker-hosts 1", 1);
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
