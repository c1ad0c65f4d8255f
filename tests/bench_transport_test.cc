// `tandem bench transport` measures the wire between its own two ends, whatever this
// process's environment says of tokens and jobs: a TANDEM_TOKEN used to reach its worker
// and not its client, and the failed start then aborted the process (exit 134) on a
// joinable thread (issue 50, finding 12).
#include <cstdlib>

#include <gtest/gtest.h>

#include "process_helpers.h"

namespace tandem {
namespace {

TEST(BenchTransport, AJobsTokenAndNameInTheEnvironmentReachBothEnds) {
  const auto dir = testing::fresh_dir("bench-transport-token");
  ::setenv("TANDEM_TOKEN", "s3cret-token", 1);
  ::setenv("SLURM_JOB_ID", "4242", 1);  // a worker's job name, when it is given none
  const auto out = testing::run_capture("bench transport --seconds 1 --json", dir / "bench.log", 120);
  ::unsetenv("TANDEM_TOKEN");
  ::unsetenv("SLURM_JOB_ID");
  ASSERT_EQ(out.code, 0) << out.out;
  EXPECT_NE(out.out.find("\"bench\":\"transport\""), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"bytes_per_sec\""), std::string::npos) << out.out;
}

}  // namespace
}  // namespace tandem
