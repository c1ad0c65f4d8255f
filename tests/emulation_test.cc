// The simulation knobs the plan's sweep stands on (bench/plan_sweep.sh): a step padded to
// --emulate-step-ms, and a worker's work stretched K times (--emulate-slowdown).
#include <chrono>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/common/cpu_time.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using namespace tandem::testing;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

TEST(Emulation, AStepIsPaddedToItsTimeAndWorkIsStretchedItsMultiple) {
  Clock::time_point t = Clock::now();
  pad_step(t, 60);
  EXPECT_GE(ms_since(t), 60);
  t = Clock::now();
  pad_step(t - 200ms, 60);  // the step took longer already
  pad_step(t, 0);           // off
  EXPECT_LT(ms_since(t), 30);
  t = Clock::now();
  emulate_slower(0.02, 3);  // 20 ms of work on a core 3 times slower: 40 ms more
  EXPECT_GE(ms_since(t), 40);
}

// The trainer's steps take at least --emulate-step-ms: 30 steps of 8 samples at 50 ms
// make at most 160 samples/s, whatever the machine (its own steps here take a few ms).
TEST(Emulation, TheTrainersStepsTakeAtLeastTheEmulatedTime) {
  const fs::path dir = fresh_dir("emulate-step");
  const int code = run_tandem("trainer --local-workers 1 --train-threads 1 --data synthetic --image-size 16 "
                              "--batch-size 8 --steps 30 --log-every 10 --emulate-step-ms 50 --summary-json " +
                                  (dir / "s.json").string(),
                              dir / "trainer.log", 180);
  ASSERT_EQ(code, 0) << slurp(dir / "trainer.log");
  const auto s = nlohmann::json::parse(slurp(dir / "s.json"));
  EXPECT_LE(s["throughput"]["ceiling_samples_per_sec"].get<double>(), 8 / 0.050 * 1.001) << s["throughput"].dump();
  EXPECT_GT(s["throughput"]["ceiling_samples_per_sec"].get<double>(), 0) << s["throughput"].dump();
}

}  // namespace
}  // namespace tandem
