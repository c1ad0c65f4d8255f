// Process supervision, with real /bin/sh children (simulate's pure pieces: simulate_test.cc).
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
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/launch/process.h"

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

// What spdlog logs while it lives (the supervisor reports through spdlog, its children's
// lines through SuperviseOptions::out).
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", std::move(sink)));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() const { return text_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream text_;
};

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

// simulate's case: every worker host exited (a typo in --data) while the trainer waits
// for them; it must not wait out its own deadline.
TEST(Supervise, WhenEveryNonCriticalChildFailsTheCriticalOnesAreStopped) {
  LogCapture log;
  std::ostringstream out;
  SuperviseOptions opts;
  opts.timeout_s = 120;
  opts.grace_s = 1;
  opts.stop_when_helpers_fail = true;
  opts.out = &out;
  const auto statuses = supervise({sh("w1", "exit 3", /*critical=*/false), sh("trainer", "exec sleep 100"),
                                   sh("w2", "sleep 0.3; exit 4", /*critical=*/false)},
                                  opts);
  EXPECT_EQ(statuses[0].describe(), "exited 3");
  EXPECT_EQ(statuses[1].describe(), "killed by SIGTERM");
  EXPECT_EQ(statuses[2].describe(), "exited 4");
  EXPECT_NE(log.text().find("every non-critical child (w1, w2) failed: sending SIGTERM to trainer"), std::string::npos)
      << log.text();
  EXPECT_EQ(log.text().find("timeout"), std::string::npos) << log.text();
}

TEST(Supervise, OneNonCriticalChildFailingOfTwoLetsTheOthersCarryOn) {
  LogCapture log;
  std::ostringstream out;
  SuperviseOptions opts;
  opts.timeout_s = 120;
  opts.grace_s = 1;
  opts.linger_s = 0.2;
  opts.stop_when_helpers_fail = true;
  opts.out = &out;
  const auto statuses = supervise({sh("w1", "exit 3", /*critical=*/false), sh("trainer", "sleep 0.5; echo done"),
                                   sh("w2", "exec sleep 100", /*critical=*/false)},
                                  opts);
  EXPECT_EQ(statuses[1].describe(), "exited 0");
  EXPECT_NE(out.str().find("[trainer] done\n"), std::string::npos);
  EXPECT_EQ(statuses[2].describe(), "killed by SIGTERM") << "stopped by the linger, after the trainer";
}

// "giving algo-3 30 s to exit on its own", "giving algo-1, algo-3 30 s to exit on their own".
TEST(Supervise, TheLingerMessageFitsOneChildOrSeveral) {
  for (const int helpers : {1, 2}) {
    LogCapture log;
    std::vector<ProcessSpec> children{sh("trainer", "true")};
    for (int i = 1; i <= helpers; ++i) children.push_back(sh("w" + std::to_string(i), "exec sleep 100", false));
    run(children, /*timeout_s=*/20, /*grace_s=*/1, /*linger_s=*/0.2);
    const std::string expected = helpers == 1 ? "trainer exited ok; giving w1 0.2 s to exit on its own"
                                              : "trainer exited ok; giving w1, w2 0.2 s to exit on their own";
    EXPECT_NE(log.text().find(expected), std::string::npos) << log.text();
  }
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

}  // namespace
}  // namespace tandem::launch
