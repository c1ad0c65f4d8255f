// What a run shows and keeps: metrics.jsonl, the live status line on a terminal (and
// plain lines elsewhere), --quiet and --log-level, and simulate's summary table and tidy
// run directory. Real `tandem` processes.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"

namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;

std::vector<nlohmann::json> read_lines(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Metrics, EveryLogStepAndEvaluationIsALineOfMetricsJsonl) {
  const fs::path dir = fresh_dir("metrics");
  ASSERT_EQ(run_tandem("trainer --local-workers 1 --train-threads 1 --steps 40 --log-every 10 --eval-data synthetic"
                       " --eval-every 15 --dataset-size 640 --batch-size 16 --summary-json " + (dir / "s.json").string(),
                       dir / "run.log", 120),
            0)
      << slurp(dir / "run.log");
  const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_EQ(s["metrics_file"], (dir / "metrics.jsonl").string());
  const auto lines = read_lines(dir / "metrics.jsonl");
  // Log steps 10, 20, 30, 40; evaluations at 15, 30 and the end (40): 15 alone, 30 and 40 joined.
  std::vector<int> steps;
  for (const auto& l : lines) steps.push_back(l["step"]);
  EXPECT_EQ(steps, (std::vector<int>{10, 15, 20, 30, 40}));
  for (const auto& l : lines) {
    EXPECT_EQ(l["total_steps"], 40);
    EXPECT_NEAR(l["epoch"].get<double>(), l["step"].get<double>() / 40.0, 1e-9) << "640 / 16 = 40 steps an epoch";
    const bool training = l.contains("loss");
    EXPECT_EQ(l.contains("eval_accuracy"), l["step"] == 15 || l["step"] == 30 || l["step"] == 40) << l.dump();
    if (!training) continue;
    EXPECT_GT(l["samples_per_sec"].get<double>(), 0);
    EXPECT_EQ(l["samples_per_sec"], l["samples_per_sec_per_rank"]) << "one rank";
    EXPECT_GE(l["data_wait_pct"].get<double>(), 0);
    EXPECT_GT(l["step_ms"]["forward_backward"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(l["lr"].get<double>(), 0.05);
    ASSERT_EQ(l["sources"].size(), 1u);
    EXPECT_EQ(l["sources"][0]["name"], "local");
    EXPECT_DOUBLE_EQ(l["sources"][0]["share"].get<double>(), 1.0);
  }
  EXPECT_FALSE(lines[1].contains("loss")) << "step 15 is an evaluation between log steps";
  EXPECT_GT(s["throughput"]["ceiling_samples_per_sec"].get<double>(),
            s["throughput"]["global_samples_per_sec"].get<double>() * 0.999);
  EXPECT_TRUE(s["plan_inputs"]["local"]["images_per_cpu_second"].get<double>() > 0) << s["plan_inputs"].dump();
}

// `script` gives the trainer a pseudo-terminal: it draws one status line instead of
// metric lines; through a pipe it logs plain lines.
TEST(StatusLine, ATerminalGetsALiveStatusLineAndAPipePlainLines) {
  if (std::system("command -v script > /dev/null") != 0) GTEST_SKIP() << "needs util-linux's script";
  const fs::path dir = fresh_dir("status-line");
  const std::string args =
      "trainer --local-workers 1 --train-threads 1 --image-size 16 --batch-size 8 --steps 60 --log-every 20 "
      "--eval-data synthetic";
  const std::string cmd = "TERM=xterm script -qec '" + std::string(TANDEM_BINARY) + " " + args + "' /dev/null > " +
                          (dir / "tty.log").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(dir / "tty.log");
  const std::string tty = slurp(dir / "tty.log");
  EXPECT_NE(tty.find("\r\x1b[2Kstep 60/60 100%"), std::string::npos) << tty;
  EXPECT_NE(tty.find("samples/s | data wait"), std::string::npos) << tty;
  EXPECT_NE(tty.find(", ETA "), std::string::npos) << tty;
  EXPECT_NE(tty.find("| evaluating"), std::string::npos) << "the evaluation at the end shows too: " << tty;
  EXPECT_EQ(tty.find("step=20 loss="), std::string::npos) << "metric lines give way to the status line";
  EXPECT_NE(tty.find("training finished"), std::string::npos) << tty;

  ASSERT_EQ(run_tandem(args, dir / "pipe.log", 60), 0);
  const std::string pipe = slurp(dir / "pipe.log");
  EXPECT_NE(pipe.find("step=20 loss="), std::string::npos) << pipe;
  EXPECT_EQ(pipe.find('\r'), std::string::npos) << pipe;

  ASSERT_EQ(run_tandem("--quiet " + args, dir / "quiet.log", 60), 0);
  EXPECT_EQ(slurp(dir / "quiet.log").find(" info "), std::string::npos) << slurp(dir / "quiet.log");
  const std::string quiet_tty = "TERM=xterm script -qec '" + std::string(TANDEM_BINARY) + " " + args +
                                " --quiet' /dev/null > " + (dir / "quiet-tty.log").string() + " 2>&1";
  ASSERT_EQ(std::system(quiet_tty.c_str()), 0);
  EXPECT_EQ(slurp(dir / "quiet-tty.log").find("step 60/60"), std::string::npos) << "--quiet has no status line";
  ASSERT_EQ(run_tandem(args + " --log-level warn", dir / "warn.log", 60), 0);
  EXPECT_EQ(slurp(dir / "warn.log").find(" info "), std::string::npos);
  EXPECT_NE(run_tandem("--log-level chatty " + args, dir / "bad.log", 60), 0);
  EXPECT_NE(slurp(dir / "bad.log").find("--log-level: chatty not in"), std::string::npos) << slurp(dir / "bad.log");
}

// simulate prints a table (not the JSON), and a run directory it made itself keeps only
// what a person reads and the trained model once the run ends well, unless --keep.
TEST(Simulate, PrintsATableAndTidiesTheRunDirectoryItMade) {
  const fs::path dir = fresh_dir("simulate-table");
  for (const bool keep : {false, true}) {
    const fs::path log = dir / (keep ? "keep.log" : "tidy.log");
    ASSERT_EQ(run_tandem("simulate --steps 30 --log-every 10" + std::string(keep ? " --keep" : ""), log, 240), 0)
        << slurp(log);
    const std::string out = slurp(log);
    EXPECT_NE(out.find("throughput  "), std::string::npos) << out;
    EXPECT_NE(out.find("samples/s global ("), std::string::npos) << out;
    EXPECT_NE(out.find("share of rank 0's batches"), std::string::npos) << out;
    EXPECT_EQ(out.find("\"param_checksums\""), std::string::npos) << "the JSON stays in its file";
    const size_t at = out.find("run directory: ");
    ASSERT_NE(at, std::string::npos) << out;
    const fs::path run = out.substr(at + 15, out.find('\n', at) - at - 15);
    EXPECT_TRUE(fs::exists(run / "algo-2/output/data/summary.json")) << run;
    EXPECT_TRUE(fs::exists(run / "algo-2/output/data/metrics.jsonl")) << run;
    EXPECT_TRUE(fs::exists(run / "algo-2/model/model.pt")) << run;
    fs::remove_all(run);
  }
}

}  // namespace
