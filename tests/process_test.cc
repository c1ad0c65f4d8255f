// Process supervision (real /bin/sh children) and the pure pieces of `simulate`.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/common/error.h"
#include "tandem/launch/process.h"
#include "tandem/launch/simulate.h"

namespace tandem::launch {
namespace {

using Clock = std::chrono::steady_clock;

ProcessSpec sh(const std::string& name, const std::string& script, bool critical = true) {
  ProcessSpec spec;
  spec.name = name;
  spec.argv = {"/bin/sh", "-c", script};
  spec.critical = critical;
  return spec;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool gone(int pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// Gone, or a zombie: dead, only waiting for whoever adopted it (init may reap lazily).
bool dead(int pid) {
  if (gone(pid)) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text(std::istreambuf_iterator<char>(stat), {});
  const auto paren = text.rfind(')');
  return paren != std::string::npos && text.substr(paren + 1, 3) == " Z ";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Runs `children` with output captured; short grace so the tests stay quick.
struct Run {
  std::vector<ExitStatus> statuses;
  std::string output;
  double elapsed = 0;
};

Run run(const std::vector<ProcessSpec>& children, double timeout_s = 20, double grace_s = 1,
        double linger_s = -1) {
  std::ostringstream out;
  SuperviseOptions opts;
  opts.timeout_s = timeout_s;
  opts.grace_s = grace_s;
  opts.linger_s = linger_s;
  opts.out = &out;
  const auto start = Clock::now();
  Run r;
  r.statuses = supervise(children, opts);
  r.elapsed = seconds_since(start);
  r.output = out.str();
  return r;
}

// ---- ExitStatus ----------------------------------------------------------------------------

TEST(ExitStatus, Describe) {
  ExitStatus s;
  s.exit_code = 0;
  EXPECT_EQ(s.describe(), "exited 0");
  EXPECT_TRUE(s.ok());
  s.exit_code = 3;
  EXPECT_EQ(s.describe(), "exited 3");
  EXPECT_FALSE(s.ok());
  s.signal = SIGKILL;
  EXPECT_EQ(s.describe(), "killed by SIGKILL");
  EXPECT_FALSE(s.ok());
  s.signal = SIGSEGV;
  EXPECT_EQ(s.describe(), "killed by SIGSEGV");
  EXPECT_EQ(ExitStatus{}.describe(), "did not exit");
}

// ---- supervise -----------------------------------------------------------------------------

TEST(Supervise, PrefixesEveryLineOfStdoutAndStderr) {
  const auto r = run({sh("a", "echo one; echo two >&2; printf 'no newline'"),
                      sh("b", "echo hello from b")});
  const auto lines = lines_of(r.output);
  const std::vector<std::string> a_lines = [&] {
    std::vector<std::string> v;
    for (const auto& l : lines) if (l.rfind("[a] ", 0) == 0) v.push_back(l);
    return v;
  }();
  EXPECT_EQ(a_lines, (std::vector<std::string>{"[a] one", "[a] two", "[a] no newline"}));
  EXPECT_NE(std::find(lines.begin(), lines.end(), "[b] hello from b"), lines.end());
  EXPECT_EQ(lines.size(), 4u) << r.output;
  EXPECT_EQ(r.output.back(), '\n');
}

TEST(Supervise, LinesSplitAcrossWritesAreJoined) {
  const auto r = run({sh("a", "printf 'hel'; sleep 0.2; printf 'lo\\nwor'; sleep 0.2; echo ld")});
  EXPECT_EQ(r.output, "[a] hello\n[a] world\n");
}

TEST(Supervise, ReportsExitCodesAndSignalsInOrder) {
  const auto r = run({sh("zero", "exit 0", false), sh("three", "exit 3", false),
                      sh("segv", "kill -SEGV $$", false)});
  ASSERT_EQ(r.statuses.size(), 3u);
  EXPECT_EQ(r.statuses[0].name, "zero");
  EXPECT_EQ(r.statuses[0].describe(), "exited 0");
  EXPECT_EQ(r.statuses[1].name, "three");
  EXPECT_EQ(r.statuses[1].exit_code, 3);
  EXPECT_EQ(r.statuses[2].name, "segv");
  EXPECT_EQ(r.statuses[2].signal, SIGSEGV);
  EXPECT_EQ(r.statuses[2].describe(), "killed by SIGSEGV");
}

TEST(Supervise, EnvOverridesAndInheritsTheParentEnvironment) {
  setenv("TANDEM_TEST_INHERITED", "from-parent", 1);
  setenv("TANDEM_TEST_OVERRIDDEN", "parent-value", 1);
  auto spec = sh("env", "echo $TANDEM_TEST_INHERITED $TANDEM_TEST_OVERRIDDEN $TANDEM_TEST_NEW");
  spec.env = {{"TANDEM_TEST_OVERRIDDEN", "child-value"}, {"TANDEM_TEST_NEW", "new"}};
  const auto r = run({spec});
  unsetenv("TANDEM_TEST_INHERITED");
  unsetenv("TANDEM_TEST_OVERRIDDEN");
  EXPECT_EQ(r.output, "[env] from-parent child-value new\n");
  EXPECT_TRUE(r.statuses[0].ok());
}

TEST(Supervise, PinsToCpus) {
  auto spec = sh("pinned", "grep Cpus_allowed_list /proc/self/status");
  spec.cpus = {0};
  const auto r = run({spec});
  EXPECT_EQ(r.output, "[pinned] Cpus_allowed_list:\t0\n");
}

TEST(Supervise, DeadlineStopsEverythingQuickly) {
  const auto r = run({sh("sleeper", "exec sleep 100")}, /*timeout_s=*/0.3);
  EXPECT_LT(r.elapsed, 3.0);
  EXPECT_EQ(r.statuses[0].describe(), "killed by SIGTERM");
  EXPECT_TRUE(gone(r.statuses[0].pid));
}

TEST(Supervise, SigkillAfterGraceReachesGrandchildren) {
  // The shell and its background sleep both ignore SIGTERM; only SIGKILL to the whole
  // process group ends them.
  const auto r = run({sh("stubborn", "trap '' TERM; sleep 100 & echo grandchild=$!; wait")},
                     /*timeout_s=*/0.3, /*grace_s=*/0.3);
  EXPECT_LT(r.elapsed, 3.0);
  EXPECT_EQ(r.statuses[0].describe(), "killed by SIGKILL");
  const auto at = r.output.find("grandchild=");
  ASSERT_NE(at, std::string::npos) << r.output;
  const int grandchild = std::stoi(r.output.substr(at + std::strlen("grandchild=")));
  // The grandchild was reparented to init; it dies from the SIGKILL at once.
  const auto start = Clock::now();
  while (!dead(grandchild) && seconds_since(start) < 2) usleep(10000);
  EXPECT_TRUE(dead(grandchild));
  EXPECT_TRUE(gone(r.statuses[0].pid));
}

TEST(Supervise, CriticalFailureStopsTheOthers) {
  const auto r = run({sh("trainer", "sleep 0.1; exit 2", /*critical=*/true),
                      sh("worker", "exec sleep 100", /*critical=*/false)});
  EXPECT_LT(r.elapsed, 3.0);
  EXPECT_EQ(r.statuses[0].describe(), "exited 2");
  EXPECT_EQ(r.statuses[1].describe(), "killed by SIGTERM");
  for (const auto& s : r.statuses) EXPECT_TRUE(gone(s.pid)) << s.name;
}

TEST(Supervise, NonCriticalFailureLetsTheOthersFinish) {
  const auto r = run({sh("worker", "exit 2", /*critical=*/false),
                      sh("trainer", "sleep 0.5; echo done", /*critical=*/true)});
  EXPECT_GE(r.elapsed, 0.5);
  EXPECT_EQ(r.statuses[0].describe(), "exited 2");
  EXPECT_EQ(r.statuses[1].describe(), "exited 0");
  EXPECT_NE(r.output.find("[trainer] done\n"), std::string::npos);
}

TEST(Supervise, LingerStopsNonCriticalChildrenAfterTheCriticalOnesFinish) {
  const auto r = run({sh("trainer", "true", /*critical=*/true),
                      sh("worker", "sleep 100", /*critical=*/false)},
                     /*timeout_s=*/20, /*grace_s=*/1, /*linger_s=*/0.5);
  EXPECT_GE(r.elapsed, 0.5);
  EXPECT_LT(r.elapsed, 4.0);
  EXPECT_EQ(r.statuses[0].describe(), "exited 0");
  EXPECT_EQ(r.statuses[1].describe(), "killed by SIGTERM");
  for (const auto& s : r.statuses) EXPECT_TRUE(gone(s.pid)) << s.name;
}

TEST(Supervise, LingerClockStartsWhenTheLastCriticalChildFinishes) {
  const auto r = run({sh("fast", "true", /*critical=*/true),
                      sh("slow", "sleep 1", /*critical=*/true),
                      sh("worker", "exec sleep 100", /*critical=*/false)},
                     /*timeout_s=*/20, /*grace_s=*/1, /*linger_s=*/0.3);
  EXPECT_GE(r.elapsed, 1.3);
  EXPECT_LT(r.elapsed, 5.0);
  EXPECT_EQ(r.statuses[0].describe(), "exited 0");
  EXPECT_EQ(r.statuses[1].describe(), "exited 0");
  EXPECT_EQ(r.statuses[2].describe(), "killed by SIGTERM");
}

TEST(Supervise, NegativeLingerWaitsForNonCriticalChildren) {
  EXPECT_LT(SuperviseOptions{}.linger_s, 0);  // the default keeps the old behaviour
  const auto r = run({sh("trainer", "true", /*critical=*/true),
                      sh("worker", "sleep 1; exit 0", /*critical=*/false)},
                     /*timeout_s=*/20, /*grace_s=*/1, /*linger_s=*/-1);
  EXPECT_GE(r.elapsed, 1.0);
  EXPECT_EQ(r.statuses[0].describe(), "exited 0");
  EXPECT_EQ(r.statuses[1].describe(), "exited 0");
}

TEST(Supervise, LingeringChildThatExitsCleanlyOnSigtermIsOk) {
  namespace fs = std::filesystem;
  // The trainer finishes only once the worker has set its trap, so SIGTERM cannot
  // arrive before it.
  const fs::path ready =
      fs::temp_directory_path() / ("tandem-linger-ready-" + std::to_string(getpid()));
  fs::remove(ready);
  const auto r = run(
      {sh("trainer", "while [ ! -e '" + ready.string() + "' ]; do sleep 0.05; done",
          /*critical=*/true),
       sh("worker", "trap 'echo bye; exit 0' TERM; touch '" + ready.string() +
                        "'; sleep 100 & wait",
          /*critical=*/false)},
      /*timeout_s=*/20, /*grace_s=*/5, /*linger_s=*/0.3);
  fs::remove(ready);
  EXPECT_LT(r.elapsed, 4.0);
  EXPECT_EQ(r.statuses[0].describe(), "exited 0");
  EXPECT_EQ(r.statuses[1].describe(), "exited 0");
  EXPECT_TRUE(r.statuses[1].ok());
  EXPECT_NE(r.output.find("[worker] bye\n"), std::string::npos) << r.output;
}

TEST(Supervise, ForwardsSigintAsSigtermAndRestoresHandlers) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  std::thread interrupter([] {
    usleep(300000);
    kill(getpid(), SIGINT);
  });
  const auto r = run({sh("sleeper", "exec sleep 100")});
  interrupter.join();
  EXPECT_LT(r.elapsed, 3.0);
  EXPECT_EQ(r.statuses[0].describe(), "killed by SIGTERM");
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(Supervise, MissingExecutableExits127WithAMessage) {
  ProcessSpec spec;
  spec.name = "ghost";
  spec.argv = {"/nonexistent/tandem-no-such-binary", "--flag"};
  const auto r = run({spec});
  EXPECT_EQ(r.statuses[0].describe(), "exited 127");
  EXPECT_NE(r.output.find("[ghost] tandem: cannot execute '/nonexistent/tandem-no-such-binary'"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("No such file or directory"), std::string::npos) << r.output;
}

TEST(Supervise, FindsExecutablesOnPath) {
  ProcessSpec spec;
  spec.name = "echo";
  spec.argv = {"echo", "found"};
  EXPECT_EQ(run({spec}).output, "[echo] found\n");
}

TEST(Supervise, BadSpecThrowsAndKillsWhatStarted) {
  ProcessSpec empty;
  empty.name = "empty";
  EXPECT_THROW(run({sh("first", "exec sleep 100"), empty}), std::runtime_error);
  auto bad_cpu = sh("bad", "true");
  bad_cpu.cpus = {-1};
  EXPECT_THROW(run({bad_cpu}), std::runtime_error);
}

TEST(Supervise, NoChildrenReturnsAtOnce) { EXPECT_TRUE(run({}).statuses.empty()); }

// ---- simulate helpers ----------------------------------------------------------------------

TEST(Simulate, PlanInterleavesGroupsDataFirst) {
  SimulateOptions opts;
  opts.trainer_hosts = 3;
  opts.worker_hosts = 1;
  const auto hosts = plan_hosts(opts);
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "algo-1");
  EXPECT_EQ(hosts[0].group, "data_group");
  EXPECT_EQ(hosts[0].instance_type, "ml.c5.18xlarge");
  EXPECT_FALSE(hosts[0].trainer);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(hosts[i].name, "algo-" + std::to_string(i + 1));
    EXPECT_EQ(hosts[i].group, "train_group");
    EXPECT_EQ(hosts[i].instance_type, "ml.p4d.24xlarge");
    EXPECT_TRUE(hosts[i].trainer);
  }
}

TEST(Simulate, PlanRejectsBadCountsNamingTheFlag) {
  SimulateOptions opts;
  opts.trainer_hosts = 0;
  try {
    plan_hosts(opts);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--trainer-hosts"), std::string::npos);
  }
  opts.trainer_hosts = 1;
  opts.worker_hosts = -1;
  try {
    plan_hosts(opts);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--worker-hosts"), std::string::npos);
  }
}

TEST(Simulate, ResourceConfigMatchesSageMakerByteForByte) {
  SimulateOptions opts;
  opts.trainer_hosts = 1;
  opts.worker_hosts = 2;
  const auto hosts = plan_hosts(opts);
  EXPECT_EQ(resource_config(hosts, 0).dump(),
            R"({"current_group_name":"data_group","current_host":"algo-1",)"
            R"("current_instance_type":"ml.c5.18xlarge","hosts":["algo-1","algo-2","algo-3"],)"
            R"("instance_groups":[{"instance_group_name":"data_group",)"
            R"("instance_type":"ml.c5.18xlarge","hosts":["algo-3","algo-1"]},)"
            R"({"instance_group_name":"train_group","instance_type":"ml.p4d.24xlarge",)"
            R"("hosts":["algo-2"]}],"network_interface_name":"lo"})");
  const auto trainer = resource_config(hosts, 1);
  EXPECT_EQ(trainer["current_host"], "algo-2");
  EXPECT_EQ(trainer["current_group_name"], "train_group");
  EXPECT_EQ(trainer["current_instance_type"], "ml.p4d.24xlarge");
}

TEST(Simulate, ResourceConfigWithoutWorkersHasOneGroup) {
  SimulateOptions opts;
  opts.trainer_hosts = 2;
  opts.worker_hosts = 0;
  opts.trainer_instance_type = "ml.g5.xlarge";
  const auto config = resource_config(plan_hosts(opts), 1);
  ASSERT_EQ(config["instance_groups"].size(), 1u);
  EXPECT_EQ(config["instance_groups"][0]["instance_group_name"], "train_group");
  EXPECT_EQ(config["instance_groups"][0]["instance_type"], "ml.g5.xlarge");
  EXPECT_EQ(config["instance_groups"][0]["hosts"].dump(), R"(["algo-2","algo-1"])");
}

TEST(Simulate, HyperparametersBecomeStrings) {
  const auto hp = sagemaker_hyperparameters(nlohmann::json::parse(
      R"({"batch-size":64,"lr":0.05,"model":"resnet18","verbose":true,"workers":[1,2],"x":null})"));
  EXPECT_EQ(hp, nlohmann::json::parse(
                    R"({"batch-size":"64","lr":"0.05","model":"resnet18","verbose":"true",)"
                    R"("workers":"[1,2]","x":"null"})"));
  EXPECT_EQ(sagemaker_hyperparameters(nullptr), nlohmann::json::object());
  EXPECT_THROW(sagemaker_hyperparameters(nlohmann::json::array()), ConfigError);
}

TEST(Simulate, HostMapListsEveryHostOnLoopback) {
  SimulateOptions opts;
  opts.worker_hosts = 1;
  EXPECT_EQ(host_map(plan_hosts(opts), {5001, 5002}),
            "algo-1=127.0.0.1:5001,algo-2=127.0.0.1:5002");
  EXPECT_THROW(host_map(plan_hosts(opts), {5001}), std::invalid_argument);
}

TEST(Simulate, FreePortsAreDistinct) {
  const auto ports = free_loopback_ports(8);
  ASSERT_EQ(ports.size(), 8u);
  for (int p : ports) EXPECT_GT(p, 0);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 8u);
}

TEST(Simulate, HostCpusWrapAroundTheMachine) {
  EXPECT_EQ(host_cpus(0, 2, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(host_cpus(1, 2, 4), (std::vector<int>{2, 3}));
  EXPECT_EQ(host_cpus(2, 2, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(host_cpus(1, 3, 4), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(host_cpus(0, 4, 2), (std::vector<int>{0, 1}));
  EXPECT_TRUE(host_cpus(3, 0, 4).empty());
}

TEST(Simulate, WritesAHostRoot) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "tandem-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path root = fs::path(tmpl) / "algo-2";
  SimulateOptions opts;
  const auto hosts = plan_hosts(opts);
  fs::create_directories(root / "output/data");
  std::ofstream(root / "output/data/summary.json") << "{\"stale\":true}";
  std::ofstream(root / "output/failure") << "old failure";

  const auto hp = sagemaker_hyperparameters({{"steps", 10}});
  write_host_root(root.string(), hosts, 1, hp);

  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(root / "input/config/resourceconfig.json"), resource_config(hosts, 1).dump());
  EXPECT_EQ(read(root / "input/config/hyperparameters.json"), R"({"steps":"10"})");
  for (const char* dir : {"output", "model", "checkpoints"}) {
    EXPECT_TRUE(fs::is_directory(root / dir)) << dir;
  }
  EXPECT_FALSE(fs::exists(root / "output/data/summary.json"));
  EXPECT_FALSE(fs::exists(root / "output/failure"));
  fs::remove_all(tmpl);
}

TEST(Simulate, StatusTable) {
  SimulateOptions opts;
  opts.worker_hosts = 1;
  const auto hosts = plan_hosts(opts);
  ExitStatus worker{"algo-1", 0, SIGTERM};
  ExitStatus trainer{"algo-2", 0, 0};
  EXPECT_EQ(status_table(hosts, {worker, trainer}),
            "host    role     status\n"
            "algo-1  worker   killed by SIGTERM\n"
            "algo-2  trainer  exited 0\n");
}

}  // namespace
}  // namespace tandem::launch
