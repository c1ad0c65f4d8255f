// Settings from files and flags cannot crash tandem or flood its messages: deep JSON,
// non-finite and out-of-range numbers, lists where one value belongs, huge values.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "process_helpers.h"
#include "tandem/common/json_limits.h"

namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;

Outcome inspect_with(const fs::path& dir, const std::string& hyperparameters, const std::string& extra = "") {
  fs::create_directories(dir / "root/input/config");
  std::ofstream(dir / "root/input/config/hyperparameters.json") << hyperparameters;
  return run_capture("inspect --sagemaker-root " + (dir / "root").string() + extra, dir / "out.log");
}

TEST(SettingsHardening, DeeplyNestedJsonIsRefusedNotParsed) {
  const fs::path dir = fresh_dir("deep-json");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  Outcome r = inspect_with(dir, "{\"steps\": " + deep + "}");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("nests arrays or objects more than 64 deep"), std::string::npos) << r.out.substr(0, 500);
  fs::create_directories(dir / "rc/input/config");
  std::ofstream(dir / "rc/input/config/resourceconfig.json") << "{\"hosts\": " << deep << "}";
  const int code = run_tandem("inspect --sagemaker-root " + (dir / "rc").string(), dir / "rc.log", 30);
  EXPECT_EQ(code, 3);
  EXPECT_NE(slurp(dir / "rc.log").find("more than 64 deep"), std::string::npos) << slurp(dir / "rc.log").substr(0, 500);
  EXPECT_EQ(tandem::json_depth(R"({"a": "[[[[\"[[", "b": [1, {"c": [2]}]})"), 4u) << "brackets in strings do not count";
}

TEST(SettingsHardening, NumbersMustBeFiniteAndInRangeWithTheRangeInPlainNumbers) {
  for (const char* v : {"\"nan\"", "\"inf\"", "\"1e20\"", "\"-3\""}) {
    const fs::path dir = fresh_dir("numbers");
    Outcome r = inspect_with(dir, std::string("{\"idle-timeout\": ") + v + "}");
    EXPECT_EQ(r.code, 3) << v << "\n" << r.out;
    EXPECT_NE(r.out.find("idle-timeout"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("179769313486231570814527"), std::string::npos) << "a 309-digit bound:\n" << r.out;
    EXPECT_TRUE(r.out.find("finite") != std::string::npos || r.out.find("at most 1000000000") != std::string::npos)
        << r.out;
  }
}

TEST(SettingsHardening, AListWhereOneValueBelongsIsRefused) {
  const fs::path dir = fresh_dir("list");
  Outcome r = inspect_with(dir, R"({"steps": ["1"]})");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("'steps' in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("takes one value, not a list"), std::string::npos) << r.out;
}

TEST(SettingsHardening, HugeOrControlCharacterValuesAreShortenedAndEscaped) {
  const fs::path dir = fresh_dir("huge");
  Outcome r = inspect_with(dir, "{\"batch-size\": \"" + std::string(100000, '7') + "x\"}");
  EXPECT_EQ(r.code, 3) << r.out.substr(0, 500);
  EXPECT_LT(r.out.size(), 2000u) << "the message repeats the value in full";
  const fs::path dir2 = fresh_dir("control");
  Outcome c = inspect_with(dir2, "{\"bad\\u001b[2Jkey\\nstep=1 loss=0\": 1}");
  EXPECT_EQ(c.code, 3) << c.out;
  EXPECT_EQ(c.out.find("\nstep=1 loss=0"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("\\x1b[2J"), std::string::npos) << c.out;
}

TEST(SettingsHardening, InspectChecksEveryRolesSettings) {
  const fs::path dir = fresh_dir("inspect-all");
  Outcome r = inspect_with(dir, R"({"lr": "-1"})");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("lr"), std::string::npos) << r.out;
}

}  // namespace

namespace {

TEST(SettingsHardening, SettingsThatNeedAbsurdMemoryAreRefusedAtStart) {
  for (const std::string& bad : {std::string("--dataset-size 100000000000"), std::string("--image-size 100000")}) {
    const fs::path dir = fresh_dir("absurd");
    const int code = run_tandem("trainer --local-workers 1 --steps 2 " + bad, dir / "run.log", 60);
    EXPECT_EQ(code, 3) << bad << "\n" << slurp(dir / "run.log");
    const std::string out = slurp(dir / "run.log");
    EXPECT_NE(out.find(bad.find("dataset") != std::string::npos ? "lower --dataset-size" : "check --image-size"),
              std::string::npos)
        << out;
  }
}

}  // namespace

namespace {

TEST(SettingsHardening, AControlCharacterInAHostNameIsRefusedNotPrinted) {
  const fs::path dir = fresh_dir("nul-host");
  fs::create_directories(dir / "root/input/config");
  std::ofstream(dir / "root/input/config/resourceconfig.json")
      << R"({"current_host": "algo-1", "hosts": ["algo-1", "algo-\u0000evil\u001b[2J"]})";
  const int code = run_tandem("inspect --sagemaker-root " + (dir / "root").string(), dir / "out.log", 30);
  const std::string out = slurp(dir / "out.log");
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find("holds a control character ('algo-\\x00evil\\x1b[2J', position 5)"), std::string::npos) << out;
  EXPECT_EQ(out.find('\0'), std::string::npos) << "a raw NUL reached the output";
}

}  // namespace
