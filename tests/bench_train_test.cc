// `tandem bench train` as a user meets it when a run fails: the error, then the exit.
#include <string>

#include <gtest/gtest.h>

#include "process_helpers.h"

namespace {

using namespace tandem::testing;

// A loss that turns NaN throws out of the measured run while the local source's threads
// wait on the scheduler for more work: the bench must close it and end with the error,
// not wait for those threads for ever (before the fix it hung until killed).
TEST(BenchTrain, ADivergedRunEndsWithItsErrorInsteadOfHanging) {
  const Outcome r = run_capture("bench train --model resnet18 --lr 1e8 --image-size 16 --batch-size 4 "
                                "--num-classes 4 --steps 3 --warmup 1 --json",
                                fresh_dir("bench-train-diverged") / "out.log", 90);
  EXPECT_NE(r.code, -1) << "killed at the deadline: the bench hung\n" << r.out;
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("loss became"), std::string::npos) << r.out;
}

}  // namespace
