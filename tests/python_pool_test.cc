// The Python pool owns everything its processes start (process_pool.h, common/spawn.h):
// children a dataset forks end with their process and with the worker, and a process
// that dies is noticed at once even while such children hold its socket open.
#include <signal.h>

#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "python_fixture.h"
#include "worker_fixture.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kFile = std::string(TANDEM_FIXTURES) + "/python_datasets/datasets.py";

DataOptions squares(const std::string& args, int procs) {
  DataOptions d;
  d.data = "python:" + kFile + ":Squares";
  d.data_args = args;
  d.python = "/usr/bin/python3";
  d.python_procs = procs;
  return d;
}

// The pids in `dir` whose file names start with `prefix` ("" = the processes', "child-" =
// what they forked).
std::vector<pid_t> pids_in(const fs::path& dir, const std::string& prefix) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool child = name.starts_with("child-");
    if (child == !prefix.empty()) out.push_back(std::atoi(name.c_str() + prefix.size()));
  }
  return out;
}

// Running: there, and not a zombie left for a reaper that may be slow (a container's init).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// Waits up to `timeout` for every pid to stop running; the ones still running.
std::vector<pid_t> still_running(const std::vector<pid_t>& pids, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<pid_t> left = pids;
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::erase_if(left, [](pid_t p) { return !running(p); });
    if (!left.empty()) std::this_thread::sleep_for(50ms);
  }
  return left;
}

// Waits until `dir` names `count` forked children.
bool children_started(const fs::path& dir, size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (pids_in(dir, "child-").size() < count && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  return pids_in(dir, "child-").size() >= count;
}

// The crash is seen when the process dies (a pidfd), not when its socket closes, which a
// forked child holding it would delay past --sample-timeout: the sample is retried at once.
TEST(PythonPool, ADatasetThatForksAndCrashesIsRetriedAtOnce) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-pool-fork-crash");
  DataOptions d = squares(R"({"forks": 1, "crash_at": 5, "once_dir": ")" + dir.string() + R"("})", 1);
  d.sample_timeout_s = 60;
  auto ds = data::make_dataset(d);
  auto clean = data::make_dataset(squares("{}", 1));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(testing::sample(*ds, 5, 0), testing::sample(*clean, 5, 0));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(fs::exists(dir / "died-5")) << "the first try did crash";
  EXPECT_LT(took, 30.0) << "the crash was found by --sample-timeout (60 s), not when the process died";
  EXPECT_EQ(ds->skipped_count(), 0u);
  fs::remove_all(dir);
}

// A pool that stops ends the children its processes forked with them.
TEST(PythonPool, WhatADatasetForksEndsWithThePool) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-pool-fork-stop");
  {
    auto ds = data::make_dataset(squares(R"({"forks": 3, "pid_dir": ")" + dir.string() + R"("})", 2));
    ASSERT_TRUE(children_started(dir, 6));
    EXPECT_EQ(still_running(pids_in(dir, "child-"), 0s).size(), 6u);
  }
  EXPECT_EQ(still_running(pids_in(dir, "child-"), 10s), std::vector<pid_t>{});
  EXPECT_EQ(still_running(pids_in(dir, ""), 10s), std::vector<pid_t>{});
  fs::remove_all(dir);
}

// A worker SIGKILLed (no destructor runs, no thread polls for its parent): its Python
// processes die with it (PR_SET_PDEATHSIG, from a thread that lives as long as the
// worker), and so does everything they forked.
TEST(PythonPool, NothingADatasetForksOutlivesItsKilledWorker) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-pool-fork-kill");
  fs::create_directories(dir / "pids");
  const std::string args = R"({"forks": 2, "pid_dir": ")" + (dir / "pids").string() + R"("})";
  testing::Worker w = testing::start_worker("--threads 2 --data python:" + kFile + ":Squares --data-args '" + args +
                                                "' --python /usr/bin/python3 --python-procs 2",
                                            dir / "w.log", 60s);
  ASSERT_NE(w.port, 0) << testing::slurp(dir / "w.log");
  ASSERT_TRUE(children_started(dir / "pids", 4)) << testing::slurp(dir / "w.log");
  const std::vector<pid_t> processes = pids_in(dir / "pids", ""), children = pids_in(dir / "pids", "child-");
  ASSERT_EQ(processes.size(), 2u);
  kill(w.child.pid, SIGKILL);
  testing::wait_exit(w.child, 30s);
  EXPECT_EQ(still_running(processes, 10s), std::vector<pid_t>{}) << "a Python process outlived its worker";
  EXPECT_EQ(still_running(children, 10s), std::vector<pid_t>{}) << "a child the dataset forked outlived the worker";
  fs::remove_all(dir);
}

// Users' code that is not deterministic is found at start: samples made twice in one
// process and once in another. The suite's own datasets are deterministic.
TEST(PythonDeterminism, ADatasetDrawingFromUnseededSourcesIsFound) {
  REQUIRE_NUMPY();
  EXPECT_EQ(data::make_dataset(squares("{}", 2))->determinism_problem(), "");
  const std::string urandom = data::make_dataset(squares(R"({"unseeded": true})", 2))->determinism_problem();
  EXPECT_NE(urandom.find(":Squares is not deterministic: samples 0, 32, 63 came out different"), std::string::npos)
      << urandom;
  EXPECT_NE(urandom.find("tandem.sample_rng()"), std::string::npos) << urandom;
  // The process id: the same in one process, different in two.
  EXPECT_NE(data::make_dataset(squares(R"({"per_process": true})", 2))->determinism_problem(), "");
}

// A dataset that imports torch inside __getitem__ (the hostile run's "import torch" there
// under --require-deterministic): torch is seeded as the sample's import ends, so its
// draws are the sample's, in the first sample as in the rest.
TEST(PythonDeterminism, TorchImportedByASampleIsSeededToo) {
  REQUIRE_NUMPY();
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) GTEST_SKIP() << "no torch for /usr/bin/python3";
  auto ds = data::make_dataset(testing::python_data("LazyTorch", "{}", 2));
  EXPECT_EQ(ds->determinism_problem(), "");
  EXPECT_EQ(testing::sample(*ds, 5, 0), testing::sample(*ds, 5, 0));
}

// Behind a worker: one loud warning at start, the trainer's summary lists it; under
// --require-deterministic the worker refuses to serve.
TEST(PythonDeterminism, AWorkerWarnsTheSummaryListsItAndTheFlagRefusesIt) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-determinism");
  const std::string data = " --data python:" + kFile + ":Squares --python /usr/bin/python3 --python-procs 2";
  const std::string unseeded = data + " --data-args '{\"unseeded\": true}'";
  testing::Worker w = testing::start_worker("--threads 2" + unseeded, dir / "w.log", 60s);
  ASSERT_NE(w.port, 0) << testing::slurp(dir / "w.log");
  EXPECT_NE(testing::slurp(dir / "w.log").find("is not deterministic"), std::string::npos) << testing::slurp(dir / "w.log");
  const auto r = testing::run_capture("trainer --workers " + w.target() + " --local-workers 0 --train-threads 1 "
                                      "--batch-size 8 --steps 3 --summary-json " + (dir / "s.json").string() + unseeded,
                                      dir / "trainer.log", 180);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto summary = nlohmann::json::parse(testing::slurp(dir / "s.json"));
  ASSERT_EQ(summary["determinism_problems"].size(), 1u) << summary.dump(2);
  EXPECT_NE(summary["determinism_problems"][0].get<std::string>().find("is not deterministic"), std::string::npos);
  const auto strict = testing::run_capture("worker --port 0 --bind 127.0.0.1 --threads 2 --require-deterministic" +
                                           unseeded, dir / "strict.log", 120);
  EXPECT_EQ(strict.code, 3) << strict.out;
  EXPECT_NE(strict.out.find("is not deterministic"), std::string::npos) << strict.out;
  EXPECT_NE(strict.out.find("(--require-deterministic)"), std::string::npos) << strict.out;
  fs::remove_all(dir);
}

// The plan's per-thread rate counts the CPU the Python processes spend making samples, not
// only the C++ thread that waits on them (issue: a PIL dataset planned 50x too fast): a
// dataset whose samples cost 2 ms of CPU each is measured by a worker at close to, and never
// faster than, the 500 samples per CPU-second that 2 ms a sample allows.
TEST(PythonCpu, ThePlansPerThreadRateCountsThePythonProcesses) {
  REQUIRE_NUMPY();
  const fs::path dir = testing::fresh_dir("python-cpu");
  const std::string data = " --data python:" + kFile + ":Busy --data-args '{\"ms\": 2, \"n\": 4096}'" +
                           " --python /usr/bin/python3 --python-procs 1";
  testing::Worker w = testing::start_worker("--threads 1" + data, dir / "w.log", 60s);
  ASSERT_NE(w.port, 0) << testing::slurp(dir / "w.log");
  const auto r = testing::run_capture("trainer --workers " + w.target() + " --local-workers 0 --train-threads 1 "
                                      "--batch-size 8 --steps 60 --summary-json " + (dir / "s.json").string() + data,
                                      dir / "trainer.log", 180);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto summary = nlohmann::json::parse(testing::slurp(dir / "s.json"));
  const double rate = summary["plan_inputs"]["workers"][0]["images_per_cpu_second"].get<double>();
  // Busy burns 2 ms of CPU a sample in Python, so a rate that counts the Python process's
  // CPU is at most 500 samples per CPU-second, and not far below it (the worker thread's own
  // share is small); one that missed it would be many times higher. CPU time, unlike a
  // wall-clock bench beside other tests, does not depend on what else the machine runs.
  std::cout << "per-thread rate: plan " << rate << " samples per CPU-second (2 ms of Python CPU a sample: at most 500)\n";
  EXPECT_LE(rate, 1000.0 / 2 * 1.02) << "faster than 2 ms of CPU a sample allows";
  EXPECT_GE(rate, 1000.0 / 2 * 0.6) << "the worker's own CPU per sample is a fraction of the dataset's 2 ms";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem
