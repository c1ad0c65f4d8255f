// TensorBoard event files (report/tensorboard.h): read back by a reader written here, as
// TensorBoard reads them (TFRecord framing with masked CRC-32C, Event messages), from a
// real trainer's run: the scalars and steps match its metrics.jsonl.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/report/tensorboard.h"
#include "tandem/v1/tensorboard.pb.h"

namespace tandem::report {
namespace {

namespace fs = std::filesystem;
using testing::fresh_dir;
using testing::slurp;

uint64_t little_endian(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
  return v;
}

// Every record of an event file, its CRCs checked.
std::vector<v1::tensorboard::Event> read_events(const fs::path& file) {
  const std::string s = slurp(file);
  std::vector<v1::tensorboard::Event> out;
  for (size_t at = 0; at < s.size();) {
    EXPECT_LE(at + 12, s.size());
    const uint64_t length = little_endian(s, at, 8);
    EXPECT_EQ(little_endian(s, at + 8, 4), masked_crc32c(std::string_view(s).substr(at, 8)));
    const std::string bytes = s.substr(at + 12, length);
    EXPECT_EQ(little_endian(s, at + 12 + length, 4), masked_crc32c(bytes));
    v1::tensorboard::Event e;
    EXPECT_TRUE(e.ParseFromString(bytes));
    out.push_back(e);
    at += 12 + length + 4;
  }
  return out;
}

fs::path only_event_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(dir)) files.push_back(f.path());
  EXPECT_EQ(files.size(), 1u) << dir;
  return files.empty() ? fs::path() : files[0];
}

// CRC-32C's published check value: "123456789" gives 0xe3069283 (masked as TFRecord does).
TEST(TensorBoard, Crc32cIsCastagnolis) {
  const uint32_t crc = 0xe3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, ATrainersEventsMatchItsMetrics) {
  const fs::path dir = fresh_dir("tensorboard");
  fs::create_directories(dir / "R");
  ASSERT_EQ(testing::run_tandem("trainer --local-workers 1 --train-threads 1 --batch-size 8 --image-size 16 --steps 30 "
                                "--log-every 10 --sagemaker-root " + (dir / "R").string(),
                                dir / "run.log", 120),
            0)
      << slurp(dir / "run.log");
  const std::vector<v1::tensorboard::Event> events = read_events(only_event_file(dir / "R/output/data/tensorboard"));
  ASSERT_EQ(events.size(), 4u) << "the file version, then one event per metrics line";
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  std::istringstream lines(slurp(dir / "R/output/data/metrics.jsonl"));
  std::string line;
  for (size_t i = 1; std::getline(lines, line); ++i) {
    const nlohmann::json m = nlohmann::json::parse(line);
    ASSERT_LT(i, events.size());
    EXPECT_EQ(events[i].step(), m["step"].get<int64_t>());
    std::map<std::string, float> values;
    for (const auto& v : events[i].summary().value()) values[v.tag()] = v.simple_value();
    EXPECT_FLOAT_EQ(values["loss"], m["loss"].get<float>());
    EXPECT_FLOAT_EQ(values["samples_per_sec"], m["samples_per_sec"].get<float>());
    EXPECT_FLOAT_EQ(values["data_wait_pct"], m["data_wait_pct"].get<float>());
    EXPECT_FLOAT_EQ(values["source_share/local"], 1.0f);
  }
  // A job with SageMaker's TensorBoard output config writes where it says.
  fs::create_directories(dir / "R/input/config");
  std::ofstream(dir / "R/input/config/tensorboardoutputconfig.json") << R"({"LocalPath": ")" + (dir / "tb").string() + R"("})";
  EXPECT_EQ(tensorboard_dir((dir / "R").string(), "elsewhere"), (dir / "tb").string());
  std::ofstream(dir / "R/input/config/tensorboardoutputconfig.json") << "{}";
  EXPECT_EQ(tensorboard_dir((dir / "R").string(), "elsewhere"), (dir / "R/output/tensorboard").string());
  EXPECT_EQ(tensorboard_dir((dir / "none").string(), "S"), "S/tensorboard");
  EXPECT_EQ(tensorboard_dir("", "S"), "S/tensorboard") << "no root: beside the summary, whatever /input/config holds";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::report
