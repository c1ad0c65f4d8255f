// A disk full for a while (the hostile run's tmpfs filled for 2 s) must not end
// metrics.jsonl or the TensorBoard events for the rest of the run: the records that could
// not be written are held and written once the disk takes them, and the file never holds
// half a record. The disk is made full with RLIMIT_FSIZE (writes past it fail, EFBIG),
// which needs no root and no mount.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/report/record_file.h"
#include "tandem/report/run_log.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;
using testing::fresh_dir;
using testing::slurp;

// While it lives, files this process writes may grow to `bytes` at most.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes) {
    signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit tight = old_;
    tight.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &tight);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &old_); }

 private:
  rlimit old_{};
};

TEST(RecordFile, ADiskFullForAWhileLosesNoRecordAndLeavesNoHalfOne) {
  const fs::path path = fresh_dir("record-file") / "m.jsonl";
  RecordFile f(path.string(), false);
  f.write("line 1\n");
  f.write("line 2\n");
  {
    const FileSizeLimit full(fs::file_size(path) + 10);  // room for part of the next record only
    f.write("line 3, longer than ten bytes\n");
    EXPECT_EQ(f.held(), 1u);
    EXPECT_EQ(slurp(path), "line 1\nline 2\n") << "half a record was left in the file";
    f.write("line 4\n");  // short enough to fit, but it waits its turn
    EXPECT_EQ(f.held(), 2u);
    EXPECT_EQ(slurp(path), "line 1\nline 2\n");
  }
  f.write("line 5\n");
  EXPECT_EQ(f.held(), 0u);
  EXPECT_EQ(slurp(path), "line 1\nline 2\nline 3, longer than ten bytes\nline 4\nline 5\n");
}

TEST(RecordFile, MetricsAndTensorBoardGoOnAfterTheDiskWasFull) {
  const fs::path dir = fresh_dir("metrics-full");
  MetricsLog log((dir / "metrics.jsonl").string(), false, 0);
  log.add_tensorboard((dir / "tb").string());
  const std::string events = log.tensorboard_path();
  ASSERT_FALSE(events.empty());
  LogPoint p;
  auto write = [&](int64_t step) {
    p.step = step;
    log.write(p, {});
  };
  for (int64_t s = 1; s <= 3; ++s) write(s);
  const uintmax_t events_before = fs::file_size(events);
  {
    const FileSizeLimit full(fs::file_size(dir / "metrics.jsonl") + 20);
    for (int64_t s = 4; s <= 6; ++s) write(s);
  }
  for (int64_t s = 7; s <= 9; ++s) write(s);
  std::istringstream lines(slurp(dir / "metrics.jsonl"));
  int64_t expected = 1;
  for (std::string line; std::getline(lines, line); ++expected) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "a broken line: " << line;
    EXPECT_EQ(j["step"], expected);
  }
  EXPECT_EQ(expected, 10) << "steps 1..9, each once, in order";
  EXPECT_GT(fs::file_size(events), events_before) << "TensorBoard's events went on too";
}

}  // namespace
}  // namespace tandem::report
