// A trainer host's rank group (rank_group.h): one exit-code rule and one output/failure
// for every program it runs (tandem's own trainer, a user's command) and for simulate
// above it; the GPU count it starts ranks by.
#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/launch/rank_group.h"
#include "tandem/launch/simulate.h"

namespace tandem::launch {
namespace {

namespace fs = std::filesystem;
using testing::slurp;

TEST(RankGroup, TheGpuCountHonoursCudaVisibleDevices) {
  EXPECT_EQ(visible_gpus(0, 0, std::nullopt), 0);
  EXPECT_EQ(visible_gpus(0, 8, std::nullopt), 8);  // this tandem has no CUDA; the ranks' torch may
  EXPECT_EQ(visible_gpus(0, 8, "0,1"), 2);
  EXPECT_EQ(visible_gpus(0, 8, " 3 , 5 ,7"), 3);
  EXPECT_EQ(visible_gpus(0, 8, ""), 0);
  EXPECT_EQ(visible_gpus(0, 8, "-1"), 0);
  EXPECT_EQ(visible_gpus(0, 8, "0,-1,2"), 1);  // CUDA stops at the first that is not a device
  EXPECT_EQ(visible_gpus(0, 8, "GPU-5f1c,GPU-77aa"), 2);
  EXPECT_EQ(visible_gpus(0, 2, "0,1,2,3"), 2);  // no more than there are
  EXPECT_EQ(visible_gpus(4, 8, "0,1,2,3"), 4);  // LibTorch's count already honours it
}

// What a failed run left: its exit code and output/failure's first and last lines.
struct Failure {
  int code = -1;
  std::string head;
  std::string last;
  std::string log;
};

Failure failure_of(int code, const fs::path& failure_file, const std::string& log) {
  std::string text = slurp(failure_file);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const size_t head_end = text.find('\n');
  return {code, text.substr(0, head_end), text.substr(text.rfind('\n') + 1), log};
}

// A SageMaker root of one trainer host and no workers, as simulate writes them.
fs::path one_host_root(const fs::path& dir) {
  SimulateOptions sim;
  sim.worker_hosts = 0;
  const fs::path root = dir / "algo-1";
  write_host_root(root.string(), plan_hosts(sim), 0, nlohmann::json::object());
  return root;
}

// The same failure (rank 1 of 2 exits 3 saying why, rank 0 is stopped) through
// `tandem launch` of tandem's trainer, of a command, and `tandem simulate` of each: one
// code, and output/failure names the rank, how it ended and its last line each time.
TEST(RankGroup, OneExitCodeRuleForTandemsTrainerACommandAndSimulate) {
  const fs::path dir = testing::fresh_dir("rank-group-rule");
  const std::string missing = (dir / "no-such-images").string();
  // A worker's settings given to every host (--idle-timeout, --claim-timeout) are not
  // passed on to the trainer ranks, which do not take them (they used to exit 2).
  const std::string trainer = "--procs-per-host 2 --allow-cpu-training --steps 5 --batch-size 4 --image-size 16 "
                              "--idle-timeout 60 --claim-timeout 60 --data imagefolder:" + missing;
  // A command that fails as the trainer does (a missing folder: configuration, exit 3):
  // rank 1 first, rank 0 stopped while waiting.
  const std::string command =
      "--procs-per-host 2 -- /bin/sh -c 'if [ $RANK = 1 ]; then echo \"no such folder " + missing +
      "\" >&2; exit 3; fi; sleep 60'";
  std::map<std::string, Failure> seen;
  for (const auto& [name, args] : {std::pair{"trainer", trainer}, std::pair{"command", command}}) {
    const fs::path root = one_host_root(dir / ("launch-" + std::string(name)));
    const std::string flags = "launch --sagemaker-root " + root.string() + " --host-map algo-1=127.0.0.1:" +
                              std::to_string(testing::free_port()) + " --master-port " +
                              std::to_string(testing::free_port()) + " ";
    const auto r = testing::run_capture(flags + args, dir / ("launch-" + std::string(name) + ".log"), 120);
    seen["launch " + std::string(name)] = failure_of(r.code, root / "output/failure", r.out);
    const fs::path run = dir / ("simulate-" + std::string(name));
    const auto s = testing::run_capture("simulate --worker-hosts 0 --run-dir " + run.string() + " " + args,
                                        dir / ("simulate-" + std::string(name) + ".log"), 180);
    seen["simulate " + std::string(name)] = failure_of(s.code, run / "algo-1/output/failure", s.out);
  }
  for (const auto& [how, f] : seen) {
    EXPECT_EQ(f.code, 3) << how << "\n" << f.log;
    EXPECT_TRUE(f.head.starts_with("rank-0 exited 3") || f.head.starts_with("rank-1 exited 3")) << how << ": " << f.head;
    EXPECT_NE(f.head.find(", so the other ranks were stopped: "), std::string::npos) << how << ": " << f.head;
    EXPECT_NE(f.last.find("no-such-images"), std::string::npos) << how << ": " << f.last;
  }
  EXPECT_NE(seen["launch trainer"].head.find("stopped: tandem trainer"), std::string::npos) << seen["launch trainer"].head;
  EXPECT_NE(seen["launch command"].head.find("stopped: /bin/sh -c"), std::string::npos) << seen["launch command"].head;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::launch
