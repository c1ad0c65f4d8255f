// `tandem launch -- COMMAND`: the ranks' environment, the command, the host's exit code
// and output/failure (pure pieces), and the real binary on a SageMaker root with /bin/sh
// ranks: variables, a failing rank, SIGTERM, a command that is not there. The workers'
// release after every trainer host's ranks (release_gate.h): its reports, in process and
// between real launchers on two roots. Python training through simulate and per-host
// roots: tests/python/launch_script_test.py.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "captured_log.h"
#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/common/launch_env.h"
#include "tandem/launch/rank_env.h"
#include "tandem/launch/rank_group.h"
#include "tandem/launch/release_gate.h"
#include "tandem/launch/simulate.h"
#include "worker_fixture.h"

namespace tandem::launch {
namespace {

namespace fs = std::filesystem;
using testing::CapturedLog;
using testing::slurp;

TEST(RankEnv, TorchrunVariablesPlaceEveryRank) {
  RankContext ctx;
  ctx.master_addr = "10.0.0.2";
  ctx.master_port = 29511;
  ctx.workers = {"10.0.0.5:6000", "10.0.0.6:6000"};
  ctx.job = "job-1";
  ctx.settings_json = R"({"image-size":"32"})";
  ctx.sagemaker_root = "/opt/ml";
  ctx.host = "algo-3";
  ctx.host_types = "algo-1=ml.c5.18xlarge,algo-3=ml.p4d.24xlarge";
  ctx.omp_threads = 4;
  ctx.network_interface = "eth0";
  const auto env = rank_environment(ctx, RankPlace::on_host(1, 2, 1, 2));
  const std::map<std::string, std::string> want = {
      {"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"}, {"ROLE_RANK", "3"}, {"ROLE_WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.2"},
      {"MASTER_PORT", "29511"}, {"OMP_NUM_THREADS", "4"}, {"GLOO_SOCKET_IFNAME", "eth0"},
      {"NCCL_SOCKET_IFNAME", "eth0"}, {"TANDEM_WORKERS", "10.0.0.5:6000,10.0.0.6:6000"},
      {"TANDEM_JOB_NAME", "job-1"}, {"TANDEM_SETTINGS", R"({"image-size":"32"})"},
      {"TANDEM_SAGEMAKER_ROOT", "/opt/ml"}, {"TANDEM_HOST", "algo-3"}, {"TANDEM_RANK_GROUP", "1"},
      {"TANDEM_HOST_TYPES", "algo-1=ml.c5.18xlarge,algo-3=ml.p4d.24xlarge"}};
  EXPECT_EQ(env, want);  // no token: no TANDEM_TOKEN; no TORCHELASTIC_*
}

TEST(RankEnv, TokenAndThreadsOnlyWhenThere) {
  RankContext ctx;
  ctx.token = "s3cret";
  const auto env = rank_environment(ctx, RankPlace{});
  EXPECT_EQ(env.at(launch_env::kToken), "s3cret");
  EXPECT_EQ(env.at(launch_env::kWorkers), "");  // set, empty: no workers
  EXPECT_EQ(env.count(launch_env::kOmpThreads), 0u);
  EXPECT_EQ(env.count(launch_env::kGlooInterface), 0u);
  EXPECT_EQ(env.count(launch_env::kHostTypes), 0u);
  EXPECT_EQ(omp_threads_per_rank(8, 2, false), 4);
  EXPECT_EQ(omp_threads_per_rank(2, 4, false), 1);
  EXPECT_EQ(omp_threads_per_rank(8, 2, true), 0);
}

// USE_LIBUV=0 unless the launcher's environment sets it: Debian's PyTorch (the image's
// python3-torch-cuda) has no libuv TCPStore, and init_process_group() fails without it.
TEST(RankEnv, LibuvOffUnlessTheLauncherSetsIt) {
  RankContext ctx;
  EXPECT_EQ(rank_environment(ctx, RankPlace{}).count(launch_env::kUseLibuv), 0u);
  ctx.libuv_off = true;
  EXPECT_EQ(rank_environment(ctx, RankPlace{}).at(launch_env::kUseLibuv), "0");
}

TEST(RankCommand, CommandOrScript) {
  LaunchOptions o;
  EXPECT_TRUE(rank_command(o, "/usr/bin/python3").empty());
  o.command = {"torchrun-free", "--x"};
  EXPECT_EQ(rank_command(o, "py"), o.command);
  o.command.clear();
  o.script = "train.py";
  o.script_args = {"--lr", "0.1"};
  EXPECT_EQ(rank_command(o, "/usr/bin/python3"),
            (std::vector<std::string>{"/usr/bin/python3", "train.py", "--lr", "0.1"}));
  o.command = {"x"};
  EXPECT_THROW(rank_command(o, "py"), ConfigError);
  LaunchOptions args_only;
  args_only.script_args = {"--lr"};
  try {
    rank_command(args_only, "py");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--script-args is given without --script"), std::string::npos) << e.what();
  }
}

std::string find_error(const std::string& name, const std::string& path) {
  try {
    find_command(name, path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(FindCommand, FindsOnPathOrSaysWhatIsWrong) {
  EXPECT_EQ(find_command("sh", "/no/such/dir:/bin"), "/bin/sh");
  EXPECT_EQ(find_command("/bin/sh", ""), "/bin/sh");
  const std::string missing = find_error("no-such-program-xyz", "/no/such/dir:/bin");
  EXPECT_NE(missing.find("cannot run the command 'no-such-program-xyz': not found on PATH (/no/such/dir:/bin)"),
            std::string::npos) << missing;
  EXPECT_NE(missing.find("install it, or give its full path"), std::string::npos) << missing;
  const fs::path dir = testing::fresh_dir("find-command");
  std::ofstream(dir / "script.py") << "print(1)\n";
  const std::string plain = find_error((dir / "script.py").string(), "");
  EXPECT_NE(plain.find("it is not executable: chmod +x it"), std::string::npos) << plain;
  EXPECT_NE(find_error(dir.string(), "").find("it is a directory"), std::string::npos);
  EXPECT_NE(find_error("./nope.sh", "").find("no such file"), std::string::npos);
  // On PATH but not executable: named, rather than "not found".
  const std::string on_path = find_error("script.py", dir.string());
  EXPECT_NE(on_path.find((dir / "script.py").string() + ": it is not executable"), std::string::npos) << on_path;
  // Executable, but exec would not start it as meant: no #! line, or a missing interpreter.
  std::ofstream(dir / "noshebang.py") << "import sys\nprint(sys.argv)\n";
  std::ofstream(dir / "badinterp.sh") << "#!/no/such/interpreter -u\necho hi\n";
  std::ofstream(dir / "good.sh") << "#!/bin/sh\necho hi\n";
  for (const char* f : {"noshebang.py", "badinterp.sh", "good.sh"}) fs::permissions(dir / f, fs::perms::owner_all);
  const std::string no_shebang = find_error((dir / "noshebang.py").string(), "");
  EXPECT_NE(no_shebang.find("it is a text file without a #! line: add one (e.g. #!/usr/bin/env python3)"),
            std::string::npos) << no_shebang;
  const std::string bad_interp = find_error("badinterp.sh", dir.string());
  EXPECT_NE(bad_interp.find("its #! line names /no/such/interpreter (no such file): install it, or fix the #! line"),
            std::string::npos) << bad_interp;
  EXPECT_EQ(find_command((dir / "good.sh").string(), ""), (dir / "good.sh").string());
  // A command from a settings file written as one string: the fix is a JSON list.
  const std::string one_string = find_error("/bin/echo hello world", "");
  EXPECT_NE(one_string.find("a command in a settings file is a JSON list of words"), std::string::npos) << one_string;
  fs::remove_all(dir);
}

ExitStatus status(const std::string& name, int code, int sig = 0, bool cause = false) {
  ExitStatus s;
  s.name = name;
  s.exit_code = sig ? -1 : code;
  s.signal = sig;
  s.stopped_others = cause;
  return s;
}

TEST(JobExitCode, TheCauseDecides) {
  EXPECT_EQ(job_exit_code({status("rank-0", 0), status("rank-1", 0)}), 0);
  // rank-1 failed first (exit 7); rank-0 died of the SIGTERM that followed.
  EXPECT_EQ(job_exit_code({status("rank-0", 0, SIGTERM), status("rank-1", 7, 0, true)}), 7);
  // A stop from outside: the ranks decide; the first that did not exit 0 counts.
  EXPECT_EQ(job_exit_code({status("rank-0", 0), status("rank-1", 5), status("rank-2", 6)}), 5);
  EXPECT_EQ(job_exit_code({status("rank-0", 0, SIGKILL)}), 128 + SIGKILL);
}

TEST(FailureReport, NamesTheRankTheCommandAndItsLastLines) {
  ExitStatus bad = status("rank-1", 7, 0, true);
  bad.tail = {"Traceback (most recent call last):", "ValueError: boom"};
  const std::string text = failure_report({status("rank-0", 0, SIGTERM), bad}, {"/usr/bin/python3", "train.py"});
  EXPECT_EQ(text,
            "rank-1 exited 7, so the other ranks were stopped: /usr/bin/python3 train.py\n"
            "its last 2 lines:\nTraceback (most recent call last):\nValueError: boom\n");
  EXPECT_EQ(failure_report({status("rank-0", 0)}, {"x"}), "");
}

// SageMaker shows 1,024 characters of output/failure: the report keeps the last lines that
// fit (the exception is the last), with control characters and binary shown as escapes.
TEST(FailureReport, FitsSageMakersLimitKeepingTheLastLinesPrintable) {
  ExitStatus bad = status("rank-0", 9);
  for (int i = 0; i < 20; ++i) bad.tail.push_back("line " + std::to_string(i) + " " + std::string(180, 'x'));
  bad.tail.push_back("\x1b[31mred\r\x01\xff");
  bad.tail.push_back("RuntimeError: the last line");
  const std::string text = failure_report({bad}, {"/usr/bin/python3", "train.py"});
  EXPECT_LE(text.size(), 1024u) << text;
  EXPECT_EQ(text.find("so the other ranks"), std::string::npos) << "one rank: " << text;
  EXPECT_NE(text.find("RuntimeError: the last line\n"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_NE(text.find("line 19 "), std::string::npos) << text;
  EXPECT_EQ(text.find("line 0 "), std::string::npos) << text;
}

TEST(Supervise, KeepsEachChildsLastLinesAndMarksTheCause) {
  std::ostringstream out;
  SuperviseOptions opts;
  opts.tail_lines = 2;
  opts.grace_s = 5;
  opts.out = &out;
  ProcessSpec bad{"bad", {"/bin/sh", "-c", "echo one; echo two; echo three >&2; exit 4"}, {}, {}, true};
  ProcessSpec slow{"slow", {"/bin/sh", "-c", "sleep 30"}, {}, {}, true};
  const auto s = supervise({bad, slow}, opts);
  EXPECT_EQ(s[0].tail, (std::vector<std::string>{"two", "three"}));
  EXPECT_TRUE(s[0].stopped_others);
  EXPECT_FALSE(s[1].stopped_others);
  EXPECT_EQ(s[1].signal, SIGTERM);
}

// ---- The real binary on a one-host SageMaker root, ranks as /bin/sh -------------------------

struct Host {
  fs::path dir;
  fs::path root;
  std::string flags;
};

// A SageMaker root of one trainer host (a single group trains) and its launch flags.
Host one_host(const std::string& name, const nlohmann::json& hyperparameters = nlohmann::json::object()) {
  Host h;
  h.dir = testing::fresh_dir(name);
  h.root = h.dir / "algo-1";
  SimulateOptions sim;
  sim.worker_hosts = 0;
  write_host_root(h.root.string(), plan_hosts(sim), 0, sagemaker_hyperparameters(hyperparameters));
  h.flags = "launch --sagemaker-root " + h.root.string() + " --host-map algo-1=127.0.0.1:6000 --master-port " +
            std::to_string(testing::free_port()) + " --procs-per-host 2 ";
  return h;
}

// `tandem launch` of one rank on the host, its program to follow.
std::string one_rank_flags(const Host& h) {
  return "launch --sagemaker-root " + h.root.string() + " --master-port " + std::to_string(testing::free_port()) +
         " --procs-per-host 1 --host-map algo-1=127.0.0.1:6000 ";
}

std::string sh_command(const std::string& script) { return "-- /bin/sh -c '" + script + "'"; }

// A second run on an output folder a live run holds, as a rank group: its rank 0 is
// refused (exit 3), and the group leaves the holder's folder alone: no output/failure,
// no summary (before, the group wrote its refusal there, and the holder's own failure
// would then not have replaced it).
TEST(LaunchCommand, ARefusedSecondRunLeavesTheHoldersFolderAlone) {
  const Host h = one_host("second-run");
  testing::Child first = testing::spawn("trainer --sagemaker-root " + h.root.string() +
                                            " --data synthetic --image-size 16 --batch-size 8 --local-workers 1"
                                            " --train-threads 1 --steps 100000 --job-name job-a --current-host algo-1",
                                        h.dir / "first.log");
  ASSERT_TRUE(testing::wait_for_text(h.dir / "first.log", "rank 0/1", std::chrono::seconds(120)))
      << slurp(h.dir / "first.log");
  const auto second = testing::run_capture(h.flags + "--allow-cpu-training --data synthetic --image-size 16"
                                           " --batch-size 8 --steps 4 --job-name job-b",
                                           h.dir / "second.log", 120);
  EXPECT_EQ(second.code, 3) << second.out;
  EXPECT_NE(second.out.find("is in use by another run"), std::string::npos) << second.out;
  EXPECT_FALSE(fs::exists(h.root / "output/failure")) << slurp(h.root / "output/failure");
  EXPECT_FALSE(fs::exists(h.root / "output/failure.algo-1")) << slurp(h.root / "output/failure.algo-1");
  EXPECT_FALSE(fs::exists(h.root / "output/data/summary.json"));
  kill(first.pid, SIGTERM);
  EXPECT_EQ(testing::wait_exit(first, std::chrono::seconds(120)), 75) << slurp(h.dir / "first.log");
  fs::remove_all(h.dir);
}

// A user's script that fails under `tandem launch`: its run's summary and report say so.
// Once the script's tandem.Feed wrote none (it failed first): a summary of the failure
// alone; once it wrote one: the failure added to it, and to its line in runs.jsonl.
TEST(LaunchCommand, AFailedScriptsRunHasItsSummaryAndReport) {
  const Host h = one_host("script-fails");
  const auto early = testing::run_capture(one_rank_flags(h) + sh_command("echo no data here >&2; exit 4"),
                                          h.dir / "early.log", 60);
  EXPECT_EQ(early.code, 4) << early.out;
  const fs::path summary = h.root / "output/data/summary.json";
  auto s = nlohmann::json::parse(slurp(summary));
  EXPECT_EQ(s["exit_code"], 4) << s.dump();
  EXPECT_NE(s["failure"].get<std::string>().find("exited 4"), std::string::npos) << s.dump();
  EXPECT_TRUE(fs::exists(h.root / "output/data/report.html"));

  // The script's feed wrote its summary before the script failed.
  const std::string line = "echo \"{\\\"steps\\\": 7}\"";
  const std::string wrote = line + " > " + summary.string() + "; " + line + " >> " +
                            (h.root / "output/data/runs.jsonl").string() + "; exit 5";
  const auto late = testing::run_capture(one_rank_flags(h) + sh_command(wrote), h.dir / "late.log", 60);
  EXPECT_EQ(late.code, 5) << late.out;
  s = nlohmann::json::parse(slurp(summary));
  EXPECT_EQ(s["steps"], 7) << s.dump();
  EXPECT_EQ(s["exit_code"], 5) << s.dump();
  const std::string runs = slurp(h.root / "output/data/runs.jsonl");
  EXPECT_NE(runs.find("\"exit_code\":5"), std::string::npos) << runs;
  EXPECT_EQ(runs.find("{\"steps\": 7}"), std::string::npos) << "its line was not amended: " << runs;
  fs::remove_all(h.dir);
}

TEST(LaunchCommand, EveryRankGetsTorchrunsAndTandemsVariables) {
  const Host h = one_host("launch-env", {{"image-size", 32}});
  const std::string script = "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR "
                             "[$TANDEM_WORKERS] $TANDEM_HOST $TANDEM_SAGEMAKER_ROOT $TANDEM_SETTINGS\" > " +
                             h.dir.string() + "/rank-$RANK";
  const auto r = testing::run_capture(h.flags + sh_command(script), h.dir / "log", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string line = slurp(h.dir / ("rank-" + std::to_string(rank)));
    EXPECT_EQ(line.rfind(std::to_string(rank) + " " + std::to_string(rank) + " 2 2 0 127.0.0.1 [] algo-1 " +
                             h.root.string() + " {",
                         0),
              0u)
        << line;
    EXPECT_NE(line.find("\"image-size\":\"32\""), std::string::npos) << line;  // from hyperparameters.json
  }
  EXPECT_NE(r.out.find("every rank exited 0"), std::string::npos) << r.out;
  fs::remove_all(h.dir);
}

// A list flag (--host-map, --workers) just before `--` takes its own value only: the
// command's words stay the command's (CLI11 took them as more of the list, and launch
// refused the command line with "unknown flag '--'").
TEST(LaunchCommand, AListFlagJustBeforeTheCommandLeavesTheCommandWhole) {
  const Host h = one_host("launch-list-last");
  const std::string flags = one_rank_flags(h);
  const std::string words = (h.dir / "words").string();
  const auto r = testing::run_capture(flags + "-- /bin/sh -c 'echo \"$0 $1\" > " + words + "' first second",
                                      h.dir / "log", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(slurp(words), "first second\n");
  fs::remove_all(h.dir);
}

// The words after -- are the program's exactly: CLI11 2.1 split "[a,b]" into "a" and "b".
TEST(LaunchCommand, TheCommandsWordsArePassedExactlyBracketsAndCommasToo) {
  const Host h = one_host("launch-brackets");
  const std::string flags = one_rank_flags(h);
  const std::string words = (h.dir / "words").string();
  const auto r = testing::run_capture(flags + "-- /bin/sh -c 'echo \"$0|$1|$2\" > " + words + "' '[a,b]' 'x,y' '[]'",
                                      h.dir / "log", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(slurp(words), "[a,b]|x,y|[]\n");
  // The same words from a settings file, and through simulate to its hosts.
  const nlohmann::json command = {"/bin/sh", "-c", "echo \"$0|$1|$2\" > " + words, "[a,b]", "x,y", "[]"};
  std::ofstream(h.dir / "settings.json") << nlohmann::json{{"command", command}}.dump();
  fs::remove(words);
  const auto f = testing::run_capture(flags + "--config " + (h.dir / "settings.json").string(), h.dir / "file.log", 60);
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_EQ(slurp(words), "[a,b]|x,y|[]\n");
  fs::remove(words);
  const auto s = testing::run_capture("simulate --worker-hosts 0 --procs-per-host 1 --run-dir " + (h.dir / "run").string() +
                                          " -- /bin/sh -c 'echo \"$0|$1|$2\" > " + words + "' '[a,b]' 'x,y' '[]'",
                                      h.dir / "sim.log", 120);
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_EQ(slurp(words), "[a,b]|x,y|[]\n");
  fs::remove_all(h.dir);
}

// A list hyperparameter as the SDK sends it: JSON from the framework estimators, str() of
// the list from the generic Estimator. Both are the command; neither is one clear error.
TEST(LaunchCommand, AListHyperparameterInEitherFormIsTheCommand) {
  for (const bool python_form : {true, false}) {
    const std::string name = python_form ? "launch-hp-python" : "launch-hp-json";
    const fs::path dir = testing::fresh_dir(name + "-out");
    const std::string words = (dir / "words").string();
    const std::vector<std::string> command = {"/bin/sh", "-c", "echo \"$0 $1\" > " + words, "first", "second"};
    std::string value = nlohmann::json(command).dump();
    if (python_form) {
      value = "[";
      for (size_t i = 0; i < command.size(); ++i) value += (i ? ", '" : "'") + command[i] + "'";
      value += "]";
    }
    const Host h = one_host(name, {{"command", value}});
    const auto r = testing::run_capture(h.flags, h.dir / "log", 60);
    ASSERT_EQ(r.code, 0) << value << "\n" << r.out;
    EXPECT_EQ(slurp(words), "first second\n") << value;
    fs::remove_all(h.dir);
    fs::remove_all(dir);
  }
  const Host bad = one_host("launch-hp-bad", {{"command", "['/bin/sh', -c, 'true']"}});
  const auto r = testing::run_capture(bad.flags, bad.dir / "log", 60);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("'command' in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("neither JSON nor a Python literal"), std::string::npos) << r.out;
  fs::remove_all(bad.dir);
}

TEST(LaunchCommand, AFailingRankEndsTheOthersWithItsCodeAndLastLines) {
  const Host h = one_host("launch-fail");
  const std::string script =
      "if [ $RANK = 1 ]; then echo about to fail; echo ValueError: boom >&2; exit 7; fi; sleep 60";
  const auto start = std::chrono::steady_clock::now();
  const auto r = testing::run_capture(h.flags + sh_command(script), h.dir / "log", 60);
  EXPECT_EQ(r.code, 7) << r.out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(45)) << "rank 0 was not stopped";
  const std::string failure = slurp(h.root / "output/failure");
  EXPECT_NE(failure.find("rank-1 exited 7, so the other ranks were stopped: /bin/sh -c"), std::string::npos) << failure;
  EXPECT_NE(failure.find("about to fail\nValueError: boom"), std::string::npos) << failure;
  fs::remove_all(h.dir);
}

TEST(LaunchCommand, SigtermReachesEveryRankAndTheScriptDecidesTheExit) {
  const Host h = one_host("launch-term");
  const std::string script = "trap \"echo stopped > " + h.dir.string() +
                             "/term-\\$RANK; exit 5\" TERM; echo ready; while true; do sleep 0.1; done";
  testing::Child launcher = testing::spawn(h.flags + sh_command(script), h.dir / "log");
  ASSERT_TRUE(testing::wait_for_text(h.dir / "log", "[rank-0] ready", std::chrono::seconds(60))) << slurp(h.dir / "log");
  ASSERT_TRUE(testing::wait_for_text(h.dir / "log", "[rank-1] ready", std::chrono::seconds(60))) << slurp(h.dir / "log");
  kill(launcher.pid, SIGTERM);
  EXPECT_EQ(testing::wait_exit(launcher, std::chrono::seconds(60)), 5) << slurp(h.dir / "log");
  EXPECT_EQ(slurp(h.dir / "term-0"), "stopped\n");
  EXPECT_EQ(slurp(h.dir / "term-1"), "stopped\n");
  // output/failure says why the ranks ended: the job was stopped, not broken.
  EXPECT_EQ(slurp(h.root / "output/failure").rfind("the job was stopped: this launcher received SIGTERM", 0), 0u)
      << slurp(h.root / "output/failure");
  fs::remove_all(h.dir);
}

// The trainer host is an ml.p4d.24xlarge (plan_hosts' default): with no GPU visible, the
// launcher says so before it starts its one rank (it used to start it without a word).
TEST(LaunchCommand, AGpuHostWithNoGpuVisibleSaysSo) {
  if (fs::exists("/dev/nvidia0")) GTEST_SKIP() << "a GPU is visible here";
  const Host h = one_host("launch-no-gpu");
  const std::string flags = h.flags.substr(0, h.flags.find("--procs-per-host"));
  const auto r = testing::run_capture(flags + sh_command("echo rank $RANK of $WORLD_SIZE"), h.dir / "log", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("is a ml.p4d.24xlarge (a GPU instance family) but no GPU is visible here"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank 0 of 1"), std::string::npos) << r.out;
  fs::remove_all(h.dir);
}

TEST(LaunchCommand, ACommandThatIsNotThereIsOneClearError) {
  const Host h = one_host("launch-missing");
  auto r = testing::run_capture(h.flags + "-- no-such-program-xyz --flag", h.dir / "log", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot run the command 'no-such-program-xyz': not found on PATH"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[rank-"), std::string::npos) << "no rank may start:\n" << r.out;
  EXPECT_NE(slurp(h.root / "output/failure").find("no-such-program-xyz"), std::string::npos);
  r = testing::run_capture(h.flags + "--script no_such_train.py", h.dir / "log2", 60);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--script no_such_train.py: no such file"), std::string::npos) << r.out;
  fs::remove_all(h.dir);
}

// What a rank leaves running in its process group (`cmd &`) ends with the job.
TEST(LaunchCommand, NothingARankStartedOutlivesTheJob) {
  const Host h = one_host("launch-leftover");
  const std::string pids = (h.dir / "pids").string();
  const auto r = testing::run_capture(h.flags + sh_command("sleep 300 & echo $! >> " + pids + "; exit 0"), h.dir / "log", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("left processes running in its process group"), std::string::npos) << r.out;
  std::ifstream in(pids);
  int n = 0;
  for (pid_t pid; in >> pid; ++n) {
    EXPECT_TRUE(kill(pid, 0) != 0 && errno == ESRCH) << "sleep " << pid << " outlived the job";
  }
  EXPECT_EQ(n, 2);
  fs::remove_all(h.dir);
}

// `timeout` and `tini -g` send SIGTERM to the launcher and to its group at once: one stop,
// with its grace, not "SIGTERM again: SIGKILL".
TEST(LaunchCommand, TwoCopiesOfOneSigtermAreOneStop) {
  const Host h = one_host("launch-term-twice");
  const std::string script = "trap \"sleep 1; exit 5\" TERM; echo ready; while true; do sleep 0.1; done";
  testing::Child launcher = testing::spawn(h.flags + sh_command(script), h.dir / "log");
  ASSERT_TRUE(testing::wait_for_text(h.dir / "log", "[rank-1] ready", std::chrono::seconds(60))) << slurp(h.dir / "log");
  ASSERT_TRUE(testing::wait_for_text(h.dir / "log", "[rank-0] ready", std::chrono::seconds(60))) << slurp(h.dir / "log");
  kill(launcher.pid, SIGTERM);
  kill(launcher.pid, SIGTERM);
  EXPECT_EQ(testing::wait_exit(launcher, std::chrono::seconds(60)), 5) << slurp(h.dir / "log");
  fs::remove_all(h.dir);
}

// An empty program runs nothing of the user's: it is an error, not tandem's own trainer.
TEST(LaunchCommand, AnEmptyScriptOrCommandIsAnError) {
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"script", ""}}, "script is given but empty: name your training script"},
      {{{"command", nlohmann::json::array()}}, "bad value for 'command' in"}};
  for (const auto& [given, words] : cases) {
    const Host h = one_host("launch-empty", given);
    const auto r = testing::run_capture("train --sagemaker-root " + h.root.string() +
                                            " --host-map algo-1=127.0.0.1:6000 --procs-per-host 1 --allow-cpu-training",
                                        h.dir / "log", 60);
    EXPECT_EQ(r.code, 3) << given.dump() << r.out;
    EXPECT_NE(r.out.find(words), std::string::npos) << given.dump() << r.out;
    EXPECT_EQ(r.out.find("[rank-"), std::string::npos) << r.out;
    fs::remove_all(h.dir);
  }
}

// ---- The workers go when every trainer host's ranks have ended ------------------------------

SecurityOptions job_security(const std::string& token = "t0k3n") {
  SecurityOptions s;
  s.token = token;
  s.job = "job-7";
  return s;
}

TEST(ReleaseGate, OnlyThisJobsTrainerHostsJoinAndReport) {
  ReleaseGateOptions o;
  o.expected = {"algo-3", "algo-4"};
  o.security = job_security();
  ReleaseGate gate(o);
  ReportDoneOptions to{"127.0.0.1", gate.port(), 5, job_security()};
  EXPECT_FALSE(report_done({"algo-9", 0}, to, nullptr)) << "not a trainer host of this job";
  EXPECT_FALSE(report_done({"algo-3", 0}, {"127.0.0.1", gate.port(), 5, job_security("wrong")}, nullptr));
  SecurityOptions other_job = job_security();
  other_job.job = "job-8";
  EXPECT_FALSE(report_done({"algo-3", 0}, {"127.0.0.1", gate.port(), 5, other_job}, nullptr));
  EXPECT_EQ(gate.wait(0.1, nullptr).missing, (std::vector<std::string>{"algo-3", "algo-4"}));
  EXPECT_FALSE(report_done({"algo-3", 300}, to, nullptr)) << "exit codes are 0..255";
  EXPECT_TRUE(report_done({"algo-3", 7}, to, nullptr));
  const ReleaseGate::Outcome seen = gate.wait(0.1, nullptr);
  ASSERT_EQ(seen.reports.size(), 1u);
  EXPECT_EQ(seen.reports[0].code, 7);
  EXPECT_EQ(gate.run().size(), 32u);
}


// Without a token the job channel says it is open, as the data plane does; and a flood
// of refused calls is a few lines in the log, not one each (the hostile run: 300 lines).
TEST(ReleaseGate, WithoutATokenItSaysItIsOpenAndRefusalsDoNotFloodTheLog) {
  CapturedLog log;
  ReleaseGateOptions o;
  o.expected = {"algo-3"};
  ReleaseGate gate(o);
  EXPECT_EQ(log.count("THE JOB CHANNEL IS OPEN"), 1u) << log.out.str();
  for (int i = 0; i < 40; ++i) EXPECT_FALSE(report_done({"algo-9", 0}, {"127.0.0.1", gate.port(), 5, {}}, nullptr));
  EXPECT_LE(log.count("refused a join"), 5u) << log.out.str();
  EXPECT_GE(log.count("refused a join"), 1u) << log.out.str();
  // It listens where the data workers do (--bind): on loopback, only there, and quietly.
  CapturedLog local_log;
  o.bind = "127.0.0.1";
  ReleaseGate local(o);
  EXPECT_EQ(local_log.count("THE JOB CHANNEL IS OPEN"), 0u) << local_log.out.str();
  // gRPC listens on IPv4 addresses through IPv6 sockets: 127.0.0.1 as ::ffff:127.0.0.1.
  const std::string v4_mapped_loopback = "0000000000000000FFFF00000100007F", any6(32, '0');
  const std::string tables = testing::slurp("/proc/net/tcp") + testing::slurp("/proc/net/tcp6");
  EXPECT_TRUE(testing::listens_on("0100007F", local.port()) ||
              testing::listens_on(v4_mapped_loopback, local.port(), "/proc/net/tcp6"))
      << tables;
  EXPECT_FALSE(testing::listens_on("00000000", local.port()) ||
               testing::listens_on(any6, local.port(), "/proc/net/tcp6"))
      << tables;
}

// The job channel's watch: a failure reported by one host reaches every watcher, with
// its host and code; a joined host gone silent ends the job (exit 5), and a watcher whose
// first host stops answering takes it for gone and stops asking.
TEST(ReleaseGate, AFailureReachesEveryWatcherAndSilenceEndsTheJob) {
  ReleaseGateOptions o;
  o.expected = {"algo-2", "algo-3"};
  o.security = job_security();
  auto gate = std::make_unique<ReleaseGate>(o);
  ReleaseReporter two("algo-2", {"127.0.0.1", gate->port(), 5, job_security()});
  ReleaseReporter three("algo-3", {"127.0.0.1", gate->port(), 5, job_security()});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // both join and watch
  EXPECT_FALSE(gate->ending().has_value());
  EXPECT_FALSE(two.ending().has_value());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(three.report(9, nullptr));
  const std::optional<JobEnd> end = gate->ending();
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->host, "algo-3");
  EXPECT_EQ(end->code, 9);
  while (!two.ending() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(two.ending().has_value()) << "the watch did not hear the end";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(two.ending()->host, "algo-3");
  EXPECT_EQ(two.ending()->code, 9);
  gate->tell(5);  // algo-2 was told, algo-3 reported: returns at once
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  // A first failure stands: a later one is a consequence.
  EXPECT_EQ(gate->end({"algo-1", 1, "later"}).host, "algo-3");

  // Silence: algo-2 joins and then its launcher goes (the reporter is destroyed).
  ReleaseGate quiet(o);
  { ReleaseReporter gone("algo-2", {"127.0.0.1", quiet.port(), 5, job_security()});
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); }
  EXPECT_FALSE(quiet.ending(60).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const std::optional<JobEnd> silent = quiet.ending(1);
  ASSERT_TRUE(silent.has_value());
  EXPECT_EQ(silent->host, "algo-2");
  EXPECT_EQ(silent->code, 5);
  EXPECT_NE(silent->reason.find("has not been heard from"), std::string::npos) << silent->reason;

  // The first host gone: a watcher gives up after silent_s, and a report then at once.
  auto lone = std::make_unique<ReleaseGate>(o);
  ReportDoneOptions to{"127.0.0.1", lone->port(), 120, job_security()};
  to.silent_s = 1;
  ReleaseReporter orphan("algo-2", to);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(orphan.ending().has_value());
  lone.reset();
  const auto gone_at = std::chrono::steady_clock::now();
  while (!orphan.ending() && std::chrono::steady_clock::now() - gone_at < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(orphan.ending().has_value());
  EXPECT_EQ(orphan.ending()->code, 5);
  EXPECT_NE(orphan.ending()->reason.find("it is gone"), std::string::npos) << orphan.ending()->reason;
  const auto report_at = std::chrono::steady_clock::now();
  EXPECT_FALSE(orphan.report(0, nullptr));
  EXPECT_LT(std::chrono::steady_clock::now() - report_at, std::chrono::seconds(1)) << "--release-wait is 120 s";

  // A first host that has exited before its watcher noticed (30 s): its port refuses the
  // report, which is not retried (it was for 10 s, or --release-wait for exit 0).
  auto left = std::make_unique<ReleaseGate>(o);
  ReleaseReporter late("algo-2", {"127.0.0.1", left->port(), 120, job_security()});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // joined
  left.reset();
  const auto late_at = std::chrono::steady_clock::now();
  EXPECT_FALSE(late.report(75, nullptr));
  EXPECT_LT(std::chrono::steady_clock::now() - late_at, std::chrono::seconds(2));
  EXPECT_FALSE(late.ending().has_value()) << "the watcher has not yet taken it for gone";
}

// A launcher of an earlier run of the same job (same token and job name) that reports to
// this run: it joined the earlier run's barrier, so its report is refused and this run's
// wait goes on (the replay that released a run's workers early and made it exit 7).
TEST(ReleaseGate, AReportOfAnEarlierRunIsRefused) {
  ReleaseGateOptions o;
  o.expected = {"algo-3"};
  o.security = job_security();
  auto earlier = std::make_unique<ReleaseGate>(o);
  o.port = earlier->port();
  ReleaseReporter stale("algo-3", {"127.0.0.1", o.port, 5, job_security()});
  // It has joined the earlier run ...
  for (int i = 0; i < 50 && earlier->wait(0, nullptr).missing.size() == 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string earlier_run = earlier->run();
  earlier.reset();
  ReleaseGate now(o);  // ... which has ended; this run listens on the same port
  ASSERT_NE(now.run(), earlier_run);
  EXPECT_FALSE(stale.report(7, nullptr));
  const ReleaseGate::Outcome seen = now.wait(0.3, nullptr);
  EXPECT_TRUE(seen.reports.empty());
  EXPECT_EQ(seen.missing, std::vector<std::string>{"algo-3"});
  // This run's own reporter is heard.
  EXPECT_TRUE(report_done({"algo-3", 0}, {"127.0.0.1", o.port, 5, job_security()}, nullptr));
  EXPECT_TRUE(now.wait(0.3, nullptr).missing.empty());
}

// 100 idle connections to the barrier (no token needed to open one) do not hold a real
// report out: it is taken at once, and the wait ends.
TEST(ReleaseGate, IdleConnectionsDoNotHoldARealReportOut) {
  ReleaseGateOptions o;
  o.expected = {"algo-3"};
  o.security = job_security();
  ReleaseGate gate(o);
  std::vector<int> idle;
  for (int i = 0; i < 100; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(gate.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    if (i % 2) ASSERT_EQ(write(fd, "GET / HTTP/1.1\r\n", 16), 16);  // half of them say a little, then nothing
    idle.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(report_done({"algo-3", 5}, {"127.0.0.1", gate.port(), 30, job_security()}, nullptr));
  const ReleaseGate::Outcome seen = gate.wait(30, nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_EQ(seen.reports.size(), 1u);
  EXPECT_EQ(seen.reports[0].code, 5);
  for (int fd : idle) close(fd);
}

// A host whose first host is gone keeps trying to report until --release-wait; a stop
// (SIGTERM) ends that within a second, not at the deadline.
TEST(ReleaseGate, AStopEndsReportingAtOnce) {
  const int closed = testing::free_port();
  std::atomic<bool> stop{false};
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(report_done({"algo-3", 0}, {"127.0.0.1", closed, 120, job_security()}, [&] { return stop.load(); }));
  const auto took = std::chrono::steady_clock::now() - start;
  later.join();
  EXPECT_LT(took, std::chrono::milliseconds(1800)) << "a stop ends the report within a second";
}

TEST(ReleaseGate, WaitsForEveryHostUntilTheDeadlineOverLoopback) {
  ReleaseGateOptions o;
  o.expected = {"algo-3", "algo-4"};
  o.security = job_security();
  ReleaseGate gate(o);  // port 0: the system's
  ReportDoneOptions to{"127.0.0.1", gate.port(), 30, job_security()};
  // Reported before the wait began, as a host whose ranks ended first does.
  EXPECT_TRUE(report_done({"algo-3", 0}, to, nullptr));
  ReleaseGate::Outcome seen = gate.wait(0.5, nullptr);
  ASSERT_EQ(seen.reports.size(), 1u);
  EXPECT_EQ(seen.reports[0].host, "algo-3");
  EXPECT_EQ(seen.missing, std::vector<std::string>{"algo-4"});
  // A stranger is refused (its launcher hears why and stops trying) and changes nothing.
  EXPECT_FALSE(report_done({"algo-4", 0}, {"127.0.0.1", gate.port(), 30, job_security("wrong")}, nullptr));
  EXPECT_EQ(gate.wait(0.2, nullptr).missing, std::vector<std::string>{"algo-4"});
  // The last host's report ends a long wait at once.
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    report_done({"algo-4", 0}, to, nullptr);
  });
  seen = gate.wait(120, nullptr);
  late.join();
  EXPECT_TRUE(seen.missing.empty());
  EXPECT_EQ(seen.reports.size(), 2u);
}

TEST(ReleaseGate, AFailedHostEndsTheWaitAndAStopToo) {
  ReleaseGateOptions o;
  o.expected = {"algo-3", "algo-4"};
  o.security = job_security();
  ReleaseGate gate(o);
  EXPECT_TRUE(report_done({"algo-4", 9}, {"127.0.0.1", gate.port(), 30, job_security()}, nullptr));
  const ReleaseGate::Outcome seen = gate.wait(120, nullptr);  // returns at once: the job is failing
  ASSERT_EQ(seen.reports.size(), 1u);
  EXPECT_EQ(seen.reports[0].code, 9);
  EXPECT_EQ(seen.missing, std::vector<std::string>{"algo-3"});
  ReleaseGateOptions quiet = o;
  ReleaseGate idle(quiet);
  EXPECT_TRUE(idle.wait(120, [] { return true; }).stopped);
  // A host that cannot reach the first one gives up at its deadline, with a log line.
  const int closed = testing::free_port();
  EXPECT_FALSE(report_done({"algo-3", 0}, {"127.0.0.1", closed, 0.5, job_security()}, nullptr));
  EXPECT_EQ(release_port(LaunchOptions{}, 29500), 29501);
  LaunchOptions given;
  given.release_port = 7000;
  EXPECT_EQ(release_port(given, 29500), 7000);
  EXPECT_THROW(release_port(LaunchOptions{}, 65535), ConfigError);
}

// Two trainer hosts' launchers (algo-1 first, algo-2) on SageMaker roots of their own,
// with /bin/sh ranks, and one `tandem worker` both are given by --workers.
struct TwoHosts {
  fs::path dir;
  testing::Worker worker;
  std::string flags[2];  // `tandem launch ...` for algo-1, algo-2, without the command
};

TwoHosts two_hosts(const std::string& name, const std::string& extra = "") {
  TwoHosts t;
  t.dir = testing::fresh_dir(name);
  t.worker = testing::start_worker("--token t0k3n --job-name job-7 --idle-timeout 300 --threads 1",
                                   t.dir / "worker.log");
  SimulateOptions sim;
  sim.trainer_hosts = 2;
  sim.worker_hosts = 0;
  const std::vector<SimHost> hosts = plan_hosts(sim);
  const std::vector<int> ports = free_loopback_ports(4);
  const std::string map = host_map(hosts, {ports[0], ports[1]});
  for (size_t i = 0; i < 2; ++i) {
    const fs::path root = t.dir / hosts[i].name;
    write_host_root(root.string(), hosts, i, nlohmann::json::object());
    t.flags[i] = "launch --sagemaker-root " + root.string() + " --host-map " + map + " --master-port " +
                 std::to_string(ports[2]) + " --release-port " + std::to_string(ports[3]) +
                 " --procs-per-host 1 --token t0k3n --job-name job-7 " + extra +
                 // --workers last before the command: a list option must leave `-- COMMAND ARGS` alone
                 " --workers " + t.worker.target() + " ";
  }
  return t;
}

// A rank command: on the host of GROUP_RANK `group`, wait for the file `gate` and then
// `then`; elsewhere end at once.
std::string rank_script(int group, const fs::path& gate, const std::string& then = "exit 0") {
  return sh_command("echo started; if [ \"$GROUP_RANK\" = " + std::to_string(group) + " ]; then while [ ! -e " +
                    gate.string() + " ]; do sleep 0.1; done; " + then + "; fi");
}

bool serving(const testing::Worker& w) {
  try {
    testing::ready_client(w.target(), {}, 5);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

TEST(LaunchRelease, TheWorkersServeUntilTheLastTrainerHostsRanksEnd) {
  TwoHosts t = two_hosts("release-wait");
  ASSERT_GT(t.worker.port, 0) << slurp(t.dir / "worker.log");
  const fs::path go = t.dir / "go";
  testing::Child first = testing::spawn(t.flags[0] + rank_script(1, go), t.dir / "algo-1.log");
  testing::Child second = testing::spawn(t.flags[1] + rank_script(1, go), t.dir / "algo-2.log");
  ASSERT_TRUE(testing::wait_for_text(t.dir / "algo-1.log", "every rank exited 0", std::chrono::seconds(60)))
      << slurp(t.dir / "algo-1.log");
  ASSERT_TRUE(testing::wait_for_text(t.dir / "algo-2.log", "[rank-1] started", std::chrono::seconds(60)))
      << slurp(t.dir / "algo-2.log");
  // algo-1's ranks have ended, algo-2's run on: the worker must still serve them.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_TRUE(serving(t.worker)) << "the worker was released while algo-2's rank ran:\n"
                                 << slurp(t.dir / "algo-1.log") << slurp(t.dir / "worker.log");
  EXPECT_EQ(slurp(t.dir / "algo-1.log").find("released"), std::string::npos) << slurp(t.dir / "algo-1.log");
  std::ofstream(go) << "";
  EXPECT_EQ(testing::wait_exit(second, std::chrono::seconds(60)), 0) << slurp(t.dir / "algo-2.log");
  EXPECT_EQ(testing::wait_exit(first, std::chrono::seconds(60)), 0) << slurp(t.dir / "algo-1.log");
  EXPECT_EQ(testing::wait_exit(t.worker.child, std::chrono::seconds(60)), 0) << slurp(t.dir / "worker.log");
  const std::string log = slurp(t.dir / "algo-1.log");
  EXPECT_NE(log.find("trainer host algo-2 reports its ranks ended (exit 0)"), std::string::npos) << log;
  EXPECT_NE(log.find("released 1 of 1 data worker"), std::string::npos) << log;
  EXPECT_NE(slurp(t.dir / "algo-2.log").find("told the first trainer host"), std::string::npos);
  fs::remove_all(t.dir);
}

TEST(LaunchRelease, AHostThatNeverReportsIsWaitedForUntilReleaseWait) {
  TwoHosts t = two_hosts("release-lost", "--release-wait 3");
  ASSERT_GT(t.worker.port, 0) << slurp(t.dir / "worker.log");
  const fs::path go = t.dir / "go";  // never made: algo-2's rank waits until it is killed
  testing::Child first = testing::spawn(t.flags[0] + rank_script(0, t.dir / "go-1"), t.dir / "algo-1.log");
  testing::Child second = testing::spawn(t.flags[1] + rank_script(1, go), t.dir / "algo-2.log");
  ASSERT_TRUE(testing::wait_for_text(t.dir / "algo-1.log", "[rank-0] started", std::chrono::seconds(60)))
      << slurp(t.dir / "algo-1.log");
  ASSERT_TRUE(testing::wait_for_text(t.dir / "algo-2.log", "[rank-1] started", std::chrono::seconds(60)))
      << slurp(t.dir / "algo-2.log");
  kill(second.pid, SIGKILL);  // its rank dies with it (PR_SET_PDEATHSIG): no report ever comes
  EXPECT_EQ(testing::wait_exit(second, std::chrono::seconds(30)), 128 + SIGKILL);
  std::ofstream(t.dir / "go-1") << "";
  EXPECT_EQ(testing::wait_exit(first, std::chrono::seconds(60)), 0) << slurp(t.dir / "algo-1.log");
  EXPECT_EQ(testing::wait_exit(t.worker.child, std::chrono::seconds(60)), 0) << slurp(t.dir / "worker.log");
  const std::string log = slurp(t.dir / "algo-1.log");
  EXPECT_NE(log.find("releasing the workers without word from 1 trainer host (algo-2) that their ranks ended: "
                     "--release-wait 3 s has passed"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("released 1 of 1 data worker"), std::string::npos) << log;
  fs::remove_all(t.dir);
}

TEST(LaunchRelease, AnotherHostsFailureIsTheFirstHostsToo) {
  TwoHosts t = two_hosts("release-fail");
  ASSERT_GT(t.worker.port, 0) << slurp(t.dir / "worker.log");
  const fs::path go = t.dir / "go";
  testing::Child first = testing::spawn(t.flags[0] + rank_script(1, go), t.dir / "algo-1.log");
  testing::Child second = testing::spawn(t.flags[1] + rank_script(1, go, "echo boom >&2; exit 7"), t.dir / "algo-2.log");
  ASSERT_TRUE(testing::wait_for_text(t.dir / "algo-1.log", "every rank exited 0", std::chrono::seconds(60)))
      << slurp(t.dir / "algo-1.log");
  std::ofstream(go) << "";
  EXPECT_EQ(testing::wait_exit(second, std::chrono::seconds(60)), 7) << slurp(t.dir / "algo-2.log");
  EXPECT_EQ(testing::wait_exit(first, std::chrono::seconds(60)), 7) << slurp(t.dir / "algo-1.log");
  EXPECT_EQ(testing::wait_exit(t.worker.child, std::chrono::seconds(60)), 0) << slurp(t.dir / "worker.log");
  EXPECT_NE(slurp(t.dir / "algo-1/output/failure").find("trainer host algo-2 failed (exit 7): its output/failure.algo-2 says why"),
            std::string::npos)
      << slurp(t.dir / "algo-1.log");
  EXPECT_NE(slurp(t.dir / "algo-2/output/failure").find("boom"), std::string::npos);
  fs::remove_all(t.dir);
}

// Ranks that run until stopped, except on the host of GROUP_RANK `group`, whose rank
// waits for `gate` and then runs `then`.
std::string ranks_until(int group, const fs::path& gate, const std::string& then) {
  return sh_command("echo started; if [ \"$GROUP_RANK\" = " + std::to_string(group) + " ]; then while [ ! -e " +
                    gate.string() + " ]; do sleep 0.1; done; " + then + "; fi; while true; do sleep 0.1; done");
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Both trainer hosts' launchers running `ranks` (@DIR@ in it: the job's directory),
// started, and the second joined to the first's job channel: what each drill below
// begins with.
struct RunningJob {
  TwoHosts t;
  testing::Child first, second;
  std::string log(int host) const { return slurp(t.dir / ("algo-" + std::to_string(host) + ".log")); }
};

std::unique_ptr<RunningJob> start_job(const std::string& name, const std::string& ranks) {
  auto j = std::make_unique<RunningJob>();
  j->t = two_hosts(name);
  EXPECT_GT(j->t.worker.port, 0) << slurp(j->t.dir / "worker.log");
  std::string command = ranks;
  for (size_t at; (at = command.find("@DIR@")) != std::string::npos;) command.replace(at, 5, j->t.dir.string());
  j->first = testing::spawn(j->t.flags[0] + command, j->t.dir / "algo-1.log");
  j->second = testing::spawn(j->t.flags[1] + command, j->t.dir / "algo-2.log");
  for (const auto& [log, text] : {std::pair{"algo-1.log", "[rank-0] started"}, {"algo-2.log", "[rank-1] started"},
                                  {"algo-2.log", "joined the job channel"}}) {
    EXPECT_TRUE(testing::wait_for_text(j->t.dir / log, text, std::chrono::seconds(60))) << slurp(j->t.dir / log);
  }
  return j;
}

// Both hosts exit `code` within 15 s of `t0`, and the worker is released (exit 0).
void expect_ended(RunningJob& j, int code, std::chrono::steady_clock::time_point t0) {
  EXPECT_EQ(testing::wait_exit(j.first, std::chrono::seconds(60)), code) << j.log(1);
  EXPECT_EQ(testing::wait_exit(j.second, std::chrono::seconds(60)), code) << j.log(2);
  EXPECT_LT(seconds_since(t0), 15) << j.log(1) << j.log(2);
  EXPECT_EQ(testing::wait_exit(j.t.worker.child, std::chrono::seconds(60)), 0) << slurp(j.t.dir / "worker.log");
}

// A rank of the second host fails while the first host's rank trains on: the first host
// hears it over the job channel and stops its ranks at once (not after --dist-timeout),
// and both exit with the cause's code; output/failure keeps the cause, each host's view
// is output/failure.<host>.
TEST(LaunchRelease, OneHostsFailureEndsEveryHostWithItsCode) {
  auto j = start_job("fail-as-one", ranks_until(1, "@DIR@/go", "echo boom >&2; exit 9"));
  const auto t0 = std::chrono::steady_clock::now();
  std::ofstream(j->t.dir / "go") << "";
  expect_ended(*j, 9, t0);
  EXPECT_NE(j->log(1).find("the job is ending: rank-1 on trainer host algo-2 exited 9"), std::string::npos) << j->log(1);
  EXPECT_NE(slurp(j->t.dir / "algo-2/output/failure").find("boom"), std::string::npos);
  EXPECT_NE(slurp(j->t.dir / "algo-1/output/failure.algo-1").find("were stopped because the job is ending"),
            std::string::npos)
      << slurp(j->t.dir / "algo-1/output/failure.algo-1");
  fs::remove_all(j->t.dir);
}

// The first host's rank fails: the second host is told and stops its rank, exit 9 too.
TEST(LaunchRelease, TheFirstHostsFailureEndsTheOthers) {
  auto j = start_job("first-fails", ranks_until(0, "@DIR@/go", "exit 9"));
  const auto t0 = std::chrono::steady_clock::now();
  std::ofstream(j->t.dir / "go") << "";
  expect_ended(*j, 9, t0);
  EXPECT_NE(j->log(2).find("says the job is ending: rank-0 on trainer host algo-1 exited 9"), std::string::npos)
      << j->log(2);
  fs::remove_all(j->t.dir);
}

// SIGTERM to the first host only: its rank stops (75), the job ends, and the second
// host's rank is stopped too; neither waits --release-wait (300 s) for the other. And
// SIGTERM to both at once (Slurm's scancel --signal=TERM, a time limit): both out within
// seconds, neither retrying its report to a first host that has left.
TEST(LaunchRelease, ASigtermedJobEndsOnEveryHostAtOnce) {
  const std::string ranks = sh_command("trap \"exit 75\" TERM; echo started; while true; do sleep 0.1; done");
  auto first_only = start_job("term-first", ranks);
  auto t0 = std::chrono::steady_clock::now();
  kill(first_only->first.pid, SIGTERM);
  expect_ended(*first_only, 75, t0);
  fs::remove_all(first_only->t.dir);

  auto both = start_job("term-both", ranks);
  t0 = std::chrono::steady_clock::now();
  kill(both->first.pid, SIGTERM);
  kill(both->second.pid, SIGTERM);
  EXPECT_EQ(testing::wait_exit(both->first, std::chrono::seconds(60)), 75) << both->log(1);
  EXPECT_EQ(testing::wait_exit(both->second, std::chrono::seconds(60)), 75) << both->log(2);
  EXPECT_LT(seconds_since(t0), 5) << both->log(1) << both->log(2);
  fs::remove_all(both->t.dir);
}

// A data worker host that cannot start (its port held by another program) exits 3 at
// once and tells the first trainer host, which stops its ranks and exits 3 with the
// worker's reason, instead of training without it or waiting --connect-timeout for it.
TEST(LaunchRelease, AWorkerHostThatCannotStartEndsTheJobAtOnceWithItsReason) {
  const fs::path dir = testing::fresh_dir("worker-cannot-start");
  SimulateOptions sim;
  sim.trainer_hosts = 1;
  sim.worker_hosts = 1;
  const std::vector<SimHost> hosts = plan_hosts(sim);
  ASSERT_FALSE(hosts[0].trainer);  // algo-1 serves data, algo-2 trains
  const std::vector<int> ports = free_loopback_ports(4);
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(ports[0]));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(holder, 4), 0);
  std::string flags[2];
  for (size_t i = 0; i < 2; ++i) {
    const fs::path root = dir / hosts[i].name;
    write_host_root(root.string(), hosts, i, nlohmann::json::object());
    flags[i] = "launch --sagemaker-root " + root.string() + " --host-map " + host_map(hosts, {ports[0], ports[1]}) +
               " --master-port " + std::to_string(ports[2]) + " --release-port " + std::to_string(ports[3]) +
               " --procs-per-host 1 --token t0k3n --job-name job-7 --bind 127.0.0.1 --threads 1 ";
  }
  testing::Child trainer = testing::spawn(flags[1] + sh_command("echo started; while true; do sleep 0.1; done"),
                                          dir / "algo-2.log");
  ASSERT_TRUE(testing::wait_for_text(dir / "algo-2.log", "[rank-0] started", std::chrono::seconds(60)))
      << slurp(dir / "algo-2.log");
  const auto t0 = std::chrono::steady_clock::now();
  testing::Child worker = testing::spawn(flags[0], dir / "algo-1.log");
  EXPECT_EQ(testing::wait_exit(worker, std::chrono::seconds(60)), 3) << slurp(dir / "algo-1.log");
  EXPECT_EQ(testing::wait_exit(trainer, std::chrono::seconds(60)), 3) << slurp(dir / "algo-2.log");
  EXPECT_LT(seconds_since(t0), 10) << slurp(dir / "algo-1.log") << slurp(dir / "algo-2.log");
  const std::string port = std::to_string(ports[0]);
  const std::string failure = slurp(dir / "algo-2/output/failure.algo-2");
  EXPECT_NE(failure.find("data worker host algo-1 cannot serve"), std::string::npos) << failure;
  EXPECT_NE(failure.find("port " + port + " is taken"), std::string::npos) << failure;
  EXPECT_NE(slurp(dir / "algo-2.log").find("the job is ending: data worker host algo-1 cannot serve"),
            std::string::npos)
      << slurp(dir / "algo-2.log");
  close(holder);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::launch
