// Stopping and failing without losing work, end to end with real processes: SIGTERM to
// every host at once (a SageMaker stop or spot interruption), SIGTERM while the trainer
// waits for workers, a source that dies mid-run, a loss that becomes NaN, and simulate.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/common/exit_codes.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace tandem::testing;

// "127.0.0.1:P1,127.0.0.1:P2,...": the --workers of a trainer on loopback.
std::string targets(std::initializer_list<int> ports) {
  std::string out;
  for (const int p : ports) {
    if (!out.empty()) out += ',';
    out += "127.0.0.1:" + std::to_string(p);
  }
  return out;
}

// A trainer fed only by `workers`, with small settings shared by every test here.
std::string fed_trainer(const std::string& workers, int steps, const std::string& extra = "", int image_size = 64) {
  return "trainer --workers " + workers + " --local-workers 0 --train-threads 1 --batch-size 8 --log-every 5"
         " --steps " + std::to_string(steps) + " --data blur-benchmark --image-size " + std::to_string(image_size) +
         extra;
}

// A trainer with its own SageMaker root (checkpoints are written only under one).
std::string trainer_args(const fs::path& root, const std::string& workers, const std::string& extra = "") {
  fs::create_directories(root);
  return fed_trainer(workers, 100000, " --sagemaker-root " + root.string() + " --summary-json " +
                                          (root / "s.json").string() + extra);
}

// A worker's settings shared by every test here; start_worker() binds a free port.
std::string worker_flags(int image_size = 64) {
  return "--threads 1 --data blur-benchmark --image-size " + std::to_string(image_size) + " --term-grace 20";
}

// A worker on a given port: one that comes back where it was.
std::string worker_args(int port, int image_size = 64) {
  return "worker --port " + std::to_string(port) + " --bind 127.0.0.1 " + worker_flags(image_size);
}

std::vector<fs::path> checkpoints(const fs::path& root) {
  std::vector<fs::path> out;
  if (!fs::exists(root / "checkpoints")) return out;
  for (const auto& e : fs::directory_iterator(root / "checkpoints")) {
    if (e.path().extension() == ".pt") out.push_back(e.path());
  }
  return out;
}

// SIGTERM to a process that waits (for workers, for rendezvous): it exits 75 (interrupted), within 5 s.
void expect_sigterm_ends_it_within_5s(Child& child, const fs::path& log) {
  std::this_thread::sleep_for(1s);  // well inside the wait
  const auto start = std::chrono::steady_clock::now();
  kill(child.pid, SIGTERM);
  EXPECT_EQ(wait_exit(child, 30s), tandem::kExitInterrupted) << slurp(log);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Signals, SigtermToEveryHostAtOnceCheckpointsTheLastStepAndExitsResumable) {
  std::mt19937 rng(7);
  for (int round = 0; round < 3; ++round) {
    const fs::path dir = fresh_dir("sigterm-all-" + std::to_string(round));
    Worker w1 = start_worker(worker_flags(), dir / "w1.log");
    Worker w2 = start_worker(worker_flags(), dir / "w2.log");
    Child trainer = spawn(trainer_args(dir / "root", targets({w1.port, w2.port})), dir / "trainer.log");
    ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=5 ", 90s)) << slurp(dir / "trainer.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1500)(rng)));
    for (Child* c : {&w1.child, &w2.child, &trainer}) kill(c->pid, SIGTERM);  // all at once, workers first
    EXPECT_EQ(wait_exit(trainer, 60s), tandem::kExitInterrupted) << slurp(dir / "trainer.log");
    // A worker released by the trainer exits 0; one whose trainer closed its streams
    // before the release came (the trainer checkpoints first) exits 75, "stopped before its
    // trainer released it": both leave the job resumable. Which one is a race under load
    // (seen in scripts/test-cuda); issue 50 makes the job end as one.
    for (const auto& [w, log] : {std::pair{&w1, "w1.log"}, std::pair{&w2, "w2.log"}}) {
      const int code = wait_exit(w->child, 60s);
      EXPECT_TRUE(code == 0 || code == tandem::kExitInterrupted) << code << "\n" << slurp(dir / log);
    }
    const auto s = nlohmann::json::parse(slurp(dir / "root/s.json"));
    EXPECT_TRUE(s["interrupted"].get<bool>());
    const auto ckpts = checkpoints(dir / "root");
    ASSERT_EQ(ckpts.size(), 1u) << slurp(dir / "trainer.log");
    char name[32];
    std::snprintf(name, sizeof name, "ckpt-%09lld.pt", static_cast<long long>(s["steps"].get<int64_t>()));
    EXPECT_EQ(ckpts[0].filename().string(), name) << "the checkpoint holds the last completed step";
  }
}

TEST(Signals, SigtermWhileWaitingForAbsentWorkersEndsTheWaitAtOnce) {
  const fs::path dir = fresh_dir("sigterm-start");
  Child trainer = spawn(trainer_args(dir / "root", targets({free_port()}),
                                     " --connect-timeout 100"),
                        dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "trainer ", 30s)) << slurp(dir / "trainer.log");
  expect_sigterm_ends_it_within_5s(trainer, dir / "trainer.log");
}

TEST(Signals, ATrainerWhoseLastSourceDiesWritesACheckpointBeforeFailing) {
  const fs::path dir = fresh_dir("source-dies");
  Worker worker = start_worker(worker_flags(), dir / "w.log");
  // The dead worker is retried in the background; --batch-timeout bounds the wait for it.
  Child trainer = spawn(trainer_args(dir / "root", targets({worker.port}), " --batch-timeout 5"),
                        dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=5 ", 90s)) << slurp(dir / "trainer.log");
  kill(worker.child.pid, SIGKILL);
  wait_exit(worker.child, 10s);
  EXPECT_EQ(wait_exit(trainer, 60s), tandem::kExitPeer) << slurp(dir / "trainer.log");
  const std::string log = slurp(dir / "trainer.log");
  // The line names the step whose checkpoint it wrote, the last completed one (it used
  // to say "failed at step 623; checkpoint of step 624").
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("training failed after completing step (\\d+); checkpoint of step (\\d+)")))
      << log;
  EXPECT_EQ(m[1], m[2]) << log;
  ASSERT_EQ(checkpoints(dir / "root").size(), 1u);
  char name[32];
  std::snprintf(name, sizeof name, "ckpt-%09lld.pt", std::stoll(m[1]));
  EXPECT_EQ(checkpoints(dir / "root")[0].filename().string(), name) << log;
  EXPECT_TRUE(fs::exists(dir / "root/output/failure"));
}

TEST(Signals, ALossThatIsNotFiniteStopsTrainingWithAClearError) {
  const fs::path dir = fresh_dir("nan");
  fs::create_directories(dir / "root");
  const int code = run_tandem("trainer --local-workers 1 --train-threads 1 --steps 60 --log-every 5 --lr 1e9"
                              " --checkpoint-every 1000 --sagemaker-root " + (dir / "root").string(),
                              dir / "run.log", 120);
  EXPECT_EQ(code, 1) << slurp(dir / "run.log");
  EXPECT_NE(slurp(dir / "run.log").find("the loss became"), std::string::npos) << slurp(dir / "run.log");
  EXPECT_TRUE(checkpoints(dir / "root").empty()) << "a diverged model must not be checkpointed";
  EXPECT_FALSE(fs::exists(dir / "root/model/model.pt"));
}

// A launcher still waiting for host names to resolve (--resolve-timeout) ends on SIGTERM
// at once, exit 75, not when the timeout has passed (it ignored SIGTERM for the full 30 s).
TEST(Signals, SigtermEndsAWaitForHostNamesAtOnce) {
  const fs::path dir = fresh_dir("sigterm-resolve");
  fs::create_directories(dir / "root/input/config");
  std::ofstream(dir / "root/input/config/resourceconfig.json")
      << R"({"current_host": "algo-1", "hosts": ["algo-1", "algo-2"], "current_group_name": "gpu",
             "current_instance_type": "ml.p4d.24xlarge", "instance_groups": [
               {"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-1"]},
               {"instance_group_name": "cpu", "instance_type": "ml.c5.xlarge", "hosts": ["algo-2"]}]})";
  // algo-2 never resolves here: the trainer host waits for it (or for the timeout).
  Child launcher = spawn("launch --resolve-timeout 30 --allow-cpu-training --sagemaker-root " + (dir / "root").string() +
                             " -- /bin/true",
                         dir / "launch.log");
  std::this_thread::sleep_for(2s);
  const auto start = std::chrono::steady_clock::now();
  kill(launcher.pid, SIGTERM);
  EXPECT_EQ(wait_exit(launcher, 60s), tandem::kExitInterrupted) << slurp(dir / "launch.log");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << slurp(dir / "launch.log");
  EXPECT_NE(slurp(dir / "launch.log").find("stopped while resolving host"), std::string::npos) << slurp(dir / "launch.log");
}

TEST(Signals, SimulateSaysInterruptedWhenItsRunIsStopped) {
  const fs::path dir = fresh_dir("simulate-sigterm");
  Child sim = spawn("simulate --steps 100000 --log-every 20 --run-dir " + (dir / "run").string(), dir / "sim.log");
  ASSERT_TRUE(wait_for_text(dir / "sim.log", "step=20 ", 90s)) << slurp(dir / "sim.log");
  kill(sim.pid, SIGTERM);
  EXPECT_EQ(wait_exit(sim, 90s), tandem::kExitInterrupted) << slurp(dir / "sim.log");
}

// The same with a command as the ranks, which a SIGTERM kills (exit 143): the run was
// stopped from outside, so simulate exits 75 as well (it exited 1).
TEST(Signals, SimulateOfACommandSaysInterruptedWhenItsRunIsStopped) {
  const fs::path dir = fresh_dir("simulate-sigterm-command");
  Child sim = spawn("simulate --run-dir " + (dir / "run").string() + " -- /bin/sh -c 'echo ranks-started; sleep 120'",
                    dir / "sim.log");
  ASSERT_TRUE(wait_for_text(dir / "sim.log", "ranks-started", 90s)) << slurp(dir / "sim.log");
  kill(sim.pid, SIGTERM);
  EXPECT_EQ(wait_exit(sim, 90s), tandem::kExitInterrupted) << slurp(dir / "sim.log");
}


// Self-healing: a worker that restarts mid-run, and one that starts late, are used again.
// Paced by events, not steps (a fixed step count outran the changes on a fast machine and
// the deadline on a loaded one): the trainer runs until both have rejoined and a few more
// steps, then SIGTERM ends it (exit 75) and its summary counts the rejoins (the late one's
// first join is none).
TEST(SelfHealing, AWorkerThatRestartsRejoinsAndALateOneJoins) {
  const fs::path dir = fresh_dir("rejoin");
  Worker first = start_worker(worker_flags(), dir / "w1.log");
  Child& w1 = first.child;
  const int p1 = first.port, p2 = free_port();  // the second is absent at start: nobody listens on p2
  auto worker = [](int port) { return worker_args(port); };
  Child trainer = spawn(fed_trainer(targets({p1, p2}), 100000, " --summary-json " + (dir / "s.json").string()),
                        dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=5 ", 90s)) << slurp(dir / "trainer.log");
  // The second worker was absent at start: it joins now.
  Child w2 = spawn(worker(p2), dir / "w2.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "127.0.0.1:" + std::to_string(p2) + " joined", 60s))
      << slurp(dir / "trainer.log");
  // The first dies and comes back on the same port.
  kill(w1.pid, SIGKILL);
  wait_exit(w1, 10s);
  Child w1_again = spawn(worker(p1), dir / "w1-again.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "127.0.0.1:" + std::to_string(p1) + " rejoined", 60s))
      << slurp(dir / "trainer.log");
  // A few steps more with both, then the end.
  const size_t steps_then = slurp(dir / "trainer.log").size();
  for (int i = 0; i < 600 && slurp(dir / "trainer.log").size() < steps_then + 200; ++i) {
    std::this_thread::sleep_for(100ms);
  }
  kill(trainer.pid, SIGTERM);
  EXPECT_EQ(wait_exit(trainer, 60s), tandem::kExitInterrupted) << slurp(dir / "trainer.log");
  const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_TRUE(s["interrupted"].get<bool>());
  ASSERT_EQ(s["workers"].size(), 2u);
  EXPECT_GE(s["workers"][0]["rejoins"].get<int>(), 1) << s["workers"].dump();
  EXPECT_EQ(s["workers"][1]["rejoins"].get<int>(), 0) << "the late worker's first join is not a rejoin: "
                                                      << s["workers"].dump();
  EXPECT_GT(s["workers"][1]["batches"].get<int>(), 0) << "the late worker served";
  EXPECT_FALSE(s["workers"][0]["failed"].get<bool>()) << s["workers"].dump();
  for (Child* c : {&w2, &w1_again}) kill(c->pid, SIGTERM);
  EXPECT_EQ(wait_exit(w2, 30s), 0);
  EXPECT_EQ(wait_exit(w1_again, 30s), 0);
}


// Exactly once, checked: a worker killed (SIGKILL) at a random point mid-run, and every
// sample of every epoch still consumed once, none twice, none from outside the plan.
TEST(SampleAudit, AWorkerKilledAtRandomPointsLosesAndRepeatsNoSample) {
  std::mt19937 rng(11);
  for (int round = 0; round < 3; ++round) {
    const fs::path dir = fresh_dir("audit-" + std::to_string(round));
    Worker w1 = start_worker(worker_flags() + " --dataset-size 400", dir / "w1.log");
    Worker w2 = start_worker(worker_flags() + " --dataset-size 400", dir / "w2.log");
    // 400 samples, batch 8: 50 batches an epoch; 130 steps span three epochs.
    Child trainer = spawn(fed_trainer(targets({w1.port, w2.port}), 130,
                                      " --dataset-size 400 --audit-samples --summary-json " + (dir / "s.json").string()),
                          dir / "trainer.log");
    ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=10 ", 90s)) << slurp(dir / "trainer.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 800)(rng)));
    kill(w1.child.pid, SIGKILL);
    EXPECT_EQ(wait_exit(trainer, 120s), 0) << slurp(dir / "trainer.log");
    const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
    const auto& a = s["sample_audit"];
    EXPECT_EQ(a["consumed"], 130 * 8) << a.dump(2);
    EXPECT_EQ(a["planned"], 130 * 8) << a.dump(2);
    EXPECT_EQ(a["missing"], 0) << a.dump(2);
    EXPECT_EQ(a["duplicated"], 0) << a.dump(2);
    EXPECT_EQ(a["unplanned"], 0) << a.dump(2);
    ASSERT_EQ(a["epochs"].size(), 3u);
    EXPECT_EQ(a["epochs"][0]["planned"], 400) << "a whole epoch: every sample once";
    EXPECT_EQ(wait_exit(w2.child, 30s), 0);
  }
}


// A rank whose peers never come waits in c10d's rendezvous, which cannot be interrupted:
// a stop still ends it within seconds, with nothing lost (no step was taken).
TEST(Signals, SigtermDuringRendezvousEndsTheRankWithinSeconds) {
  const fs::path dir = fresh_dir("sigterm-rendezvous");
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "0", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
  Child rank0 = spawn("trainer --local-workers 1 --train-threads 1 --steps 10 --dist-timeout 300", dir / "rank0.log");
  for (const char* v : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(v);
  ASSERT_TRUE(wait_for_text(dir / "rank0.log", "trainer ", 30s)) << slurp(dir / "rank0.log");
  expect_sigterm_ends_it_within_5s(rank0, dir / "rank0.log");
}


// One rank, then two, fed by one worker that hangs (SIGSTOP), then SIGTERM to every rank:
// a rank waiting for a batch stops waiting at once (with peers, it votes to stop through
// the gradient sync), and all stop at the same step instead of waiting out --batch-timeout.
// --stop-grace reaches tandem's own trainer ranks as it reaches a command's: a rank that
// does not end after SIGTERM (in the middle of a long step here) is killed when the grace is over
// (the launcher used to give tandem's ranks a fixed 100 s).
TEST(Signals, StopGraceReachesTandemsOwnRanks) {
  const fs::path dir = fresh_dir("stop-grace-own-ranks");
  fs::create_directories(dir / "root");
  // Steps of 5 s that a SIGTERM does not cut short (the stop is taken at the next step):
  // the ranks answer it only after --stop-grace 2, and are killed then. (A stopped rank
  // would not do: the stop sends SIGCONT after SIGTERM, and it answers at once.)
  Child launcher = spawn("launch --procs-per-host 2 --local-workers 1 --train-threads 1 --batch-size 4 --steps 100000"
                         " --data synthetic --image-size 16 --log-every 1 --emulate-step-ms 5000 --stop-grace 2"
                         " --sagemaker-root " + (dir / "root").string(),
                         dir / "launch.log");
  ASSERT_TRUE(wait_for_text(dir / "launch.log", "step=1 ", 120s)) << slurp(dir / "launch.log");
  const auto start = std::chrono::steady_clock::now();
  kill(launcher.pid, SIGTERM);
  EXPECT_NE(wait_exit(launcher, 60s), -1) << slurp(dir / "launch.log");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s) << slurp(dir / "launch.log");
  EXPECT_NE(slurp(dir / "launch.log").find("still running 2s after SIGTERM; sending SIGKILL"), std::string::npos)
      << slurp(dir / "launch.log");
}

TEST(Signals, SigtermToRanksWaitingOnAHungSourceStopsThemTogether) {
  for (const int world : {1, 2}) {
    SCOPED_TRACE(std::to_string(world) + " rank(s)");
    const fs::path dir = fresh_dir("sigterm-ranks-hung-" + std::to_string(world));
    Worker w = start_worker(worker_flags(), dir / "w.log");
    ASSERT_NE(w.port, 0) << slurp(dir / "w.log");
    const int port = w.port;
    Child& worker = w.child;
    setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(free_port()).c_str(), 1);
    std::vector<Child> ranks;
    for (int rank = 0; rank < world; ++rank) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      const fs::path log = dir / ("rank" + std::to_string(rank) + ".log");
      ranks.push_back(spawn(rank == 0 ? trainer_args(dir / "root", targets({port}), " --batch-timeout 300")
                                      : fed_trainer(targets({port}), 100000, " --batch-timeout 300"),
                            log));
    }
    for (const char* v : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(v);
    ASSERT_TRUE(wait_for_text(dir / "rank0.log", "step=5 ", 90s)) << slurp(dir / "rank0.log");
    kill(worker.pid, SIGSTOP);
    std::this_thread::sleep_for(2s);  // the batches already in flight run out
    const auto start = std::chrono::steady_clock::now();
    for (Child& r : ranks) kill(r.pid, SIGTERM);
    for (int rank = 0; rank < world; ++rank) {
      const fs::path log = dir / ("rank" + std::to_string(rank) + ".log");
      EXPECT_EQ(wait_exit(ranks[static_cast<size_t>(rank)], 60s), tandem::kExitInterrupted) << slurp(log);
    }
    // Each wait ends at once; the rest is the checkpoint and two calls to the hung worker (3 s deadlines).
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    const auto s = nlohmann::json::parse(slurp(dir / "root/s.json"));
    EXPECT_TRUE(s["interrupted"].get<bool>());
    const auto ckpts = checkpoints(dir / "root");
    ASSERT_EQ(ckpts.size(), 1u) << slurp(dir / "rank0.log");
    char name[32];
    std::snprintf(name, sizeof name, "ckpt-%09lld.pt", static_cast<long long>(s["steps"].get<int64_t>()));
    EXPECT_EQ(ckpts[0].filename().string(), name);
    if (world == 2) {
      EXPECT_EQ(s["param_checksums"][0], s["param_checksums"][1]) << "both ranks stopped at one step";
    }
    kill(worker.pid, SIGKILL);
    wait_exit(worker, 10s);
  }
}

// A worker that hangs (SIGSTOP) mid-run: the batch it holds is hedged to the other
// worker and training finishes; the hung one never answers again.
TEST(SelfHealing, AHungWorkerDoesNotStallTraining) {
  const fs::path dir = fresh_dir("sigstop-worker");
  Worker w1 = start_worker(worker_flags(), dir / "w1.log");
  Worker w2 = start_worker(worker_flags(), dir / "w2.log");
  Child trainer = spawn(fed_trainer(targets({w1.port, w2.port}), 300,
                                    " --batch-timeout 15 --summary-json " + (dir / "s.json").string()),
                        dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=20 ", 90s)) << slurp(dir / "trainer.log");
  kill(w1.child.pid, SIGSTOP);
  EXPECT_EQ(wait_exit(trainer, 120s), 0) << slurp(dir / "trainer.log");
  const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_EQ(s["steps"], 300);
  EXPECT_GE(s["hedged_requests"].get<int>(), 1) << s.dump(2);
  kill(w1.child.pid, SIGKILL);
}

}  // namespace

namespace {

// A process that dies of a fatal signal says so on stderr, with where it was (each frame as
// object +offset for addr2line), and still dies of that signal: what made the crash on
// the GPU machine (a libjpeg built against another jconfig.h) findable in one run.
TEST(CrashReport, AFatalSignalIsReportedWithABacktraceAndStillKills) {
  const fs::path dir = fresh_dir("crash_report");
  Worker w = start_worker("--data synthetic --idle-timeout 60", dir / "worker.log");
  ASSERT_GT(w.port, 0) << slurp(dir / "worker.log");
  kill(w.child.pid, SIGSEGV);
  EXPECT_EQ(wait_exit(w.child, 30s), 128 + SIGSEGV);
  const std::string log = slurp(dir / "worker.log");
  EXPECT_NE(log.find("tandem: fatal signal 11 (Segmentation fault)"), std::string::npos) << log;
  EXPECT_NE(log.find("backtrace (object +offset):"), std::string::npos) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("#0 \\S+ \\+0x[0-9a-f]+"))) << log;
}

}  // namespace
