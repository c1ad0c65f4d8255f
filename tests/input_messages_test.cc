// Messages built from what a user or a file gave: values shortened and escaped (even
// 10 MB ones, even bytes that are not UTF-8), numbers refused outside their range with
// the range as written, the nearest name suggested for a typo in a settings file or a
// pipeline, and where a conflicting setting came from.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <png.h>

#include "image_fixtures.h"
#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/augment/pipeline_spec.h"
#include "tandem/launch/simulate.h"

namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;

const std::string kHuge(10'000'000, 'a');

Outcome inspect_root(const fs::path& dir, const std::string& resourceconfig, const std::string& hyperparameters,
                     const std::string& extra = "") {
  fs::create_directories(dir / "root/input/config");
  if (!resourceconfig.empty()) std::ofstream(dir / "root/input/config/resourceconfig.json") << resourceconfig;
  if (!hyperparameters.empty()) std::ofstream(dir / "root/input/config/hyperparameters.json") << hyperparameters;
  return run_capture("inspect --sagemaker-root " + (dir / "root").string() + extra, dir / "out.log", 60);
}

// Every byte of `out` below 0x20 (but newline) or not part of well-formed UTF-8 is a
// byte a terminal would get raw.
bool has_raw_bytes(const std::string& out) {
  const bool control = std::any_of(out.begin(), out.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 && c != '\n';
  });
  return control || !tandem::valid_utf8(out);
}

TEST(InputMessages, PrintableEscapesBytesThatAreNotUtf8AndKeepsUtf8) {
  using tandem::printable;
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac") << "UTF-8 stays as it is";
  EXPECT_EQ(printable("algo-\xff\xfe" "1"), "algo-\\xff\\xfe1");
  EXPECT_EQ(printable("\xc3"), "\\xc3") << "a sequence cut short";
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a surrogate is not UTF-8";
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf") << "an overlong '/'";
  EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\xc2\\x9b2J") << "C1 controls (CSI) are escaped";
  const std::string cut = printable(std::string(100, 'a') + "\xe2\x82\xac\xe2\x82\xac", 101);
  EXPECT_EQ(cut, std::string(100, 'a') + "\xe2\x82\xac... (106 bytes)") << "never cut inside a character";
  EXPECT_TRUE(tandem::valid_utf8("caf\xc3\xa9"));
  EXPECT_FALSE(tandem::valid_utf8("caf\xe9"));
}

TEST(InputMessages, ATenMegabyteHostNameIsShortenedInOneShortLine) {
  const fs::path dir = fresh_dir("huge-host");
  Outcome r = inspect_root(dir, R"({"current_host": ")" + kHuge + R"(", "hosts": ["algo-1"]})", "");
  EXPECT_EQ(r.code, 3) << r.out.substr(0, 500);
  EXPECT_LT(r.out.size(), 1000u) << r.out.substr(0, 1000);
  EXPECT_NE(r.out.find("field \"current_host\": is 10000000 bytes long ('aaaa"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("... (10000000 bytes)'), more than the 255 a name may have"), std::string::npos) << r.out;
}

TEST(InputMessages, ATenMegabyteSettingIsShortenedInOneShortLine) {
  for (const char* command : {"inspect", "trainer --steps 1"}) {
    const fs::path dir = fresh_dir("huge-setting");
    fs::create_directories(dir / "root/input/config");
    std::ofstream(dir / "root/input/config/hyperparameters.json") << R"({"data": ")" + kHuge + R"("})";
    const Outcome r = run_capture(std::string(command) + " --sagemaker-root " + (dir / "root").string(),
                                  dir / "out.log", 60);
    EXPECT_EQ(r.code, 3) << command << ": " << r.out.substr(0, 500);
    EXPECT_LT(r.out.size(), 1500u) << command << ": " << r.out.substr(0, 1500);
    EXPECT_NE(r.out.find("bad value for 'data' in"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("... (10000000 bytes)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("is longer than 16384 bytes"), std::string::npos) << r.out;
  }
}

TEST(InputMessages, BytesThatAreNotUtf8AreEscapedNotEchoed) {
  const fs::path dir = fresh_dir("bad-utf8");
  Outcome r = inspect_root(dir, "{\"current_host\": \"algo-\xff\xfe\", \"hosts\": [\"algo-1\"]}", "");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("\\xff"), std::string::npos) << r.out;
  EXPECT_FALSE(has_raw_bytes(r.out)) << r.out;
  // A settings file: the JSON parser's own message quotes the bytes it read.
  const fs::path dir2 = fresh_dir("bad-utf8-hp");
  r = inspect_root(dir2, "", "{\"data\": \"x\xc3(\"}");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("\\xc3"), std::string::npos) << r.out;
  EXPECT_FALSE(has_raw_bytes(r.out)) << r.out;
  // A flag (SM_* variables and the command line reach the same checks).
  const fs::path dir3 = fresh_dir("bad-utf8-flag");
  r = run_capture("inspect --data \"$(printf 'synthetic\\377\\033[2J')\"", dir3 / "out.log");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("synthetic\\xff\\x1b[2J"), std::string::npos) << r.out;
  EXPECT_FALSE(has_raw_bytes(r.out)) << r.out;
}

TEST(InputMessages, UnsignedSettingsRefuseNegativesAndOverflowWithTheRange) {
  const std::string range = "use 0 to 18446744073709551615";
  for (const std::string flag : {"--seed -5", "--seed 18446744073709551616", "--dataset-size -1", "--seed 1e3"}) {
    const Outcome r = run_capture("inspect " + flag, fresh_dir("unsigned-flag") / "out.log");
    EXPECT_EQ(r.code, 2) << flag << ": " << r.out;
    EXPECT_NE(r.out.find(range), std::string::npos) << flag << ": " << r.out;
    EXPECT_EQ(r.out.find("18446744073709551615 samples"), std::string::npos) << r.out;
  }
  // hyperparameters.json: SageMaker passes every value as a string.
  for (const std::string hp : {R"({"seed": "-5"})", R"({"dataset_size": "18446744073709551616"})",
                                R"({"dataset-size": -1})"}) {
    const Outcome r = inspect_root(fresh_dir("unsigned-hp"), "", hp);
    EXPECT_EQ(r.code, 3) << hp << ": " << r.out;
    EXPECT_NE(r.out.find("in "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(range), std::string::npos) << hp << ": " << r.out;
  }
  // What passes is read as written: decimal, never octal.
  const fs::path dir = fresh_dir("unsigned-ok");
  const Outcome ok = run_capture("trainer --steps 1 --batch-size 4 --local-workers 1 --dataset-size 010 "
                                 "--seed 18446744073709551615 --sagemaker-root " + (dir / "none").string() +
                                 " --summary-json " + (dir / "s.json").string(), dir / "out.log", 120);
  EXPECT_EQ(ok.code, 0) << ok.out;
  const nlohmann::json settings = nlohmann::json::parse(slurp(dir / "s.json"))["settings"];
  EXPECT_EQ(settings["dataset_size"], 10) << settings;
  EXPECT_EQ(settings["seed"].get<uint64_t>(), UINT64_MAX) << settings;
}

TEST(InputMessages, AnUnknownKeyInASettingsFileGetsTheNearestName) {
  Outcome r = inspect_root(fresh_dir("typo-hp"), "", R"({"batch_sise": "8"})");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("unknown setting 'batch_sise' in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hyperparameters.json: did you mean 'batch_size'?"), std::string::npos) << r.out;
  const fs::path dir = fresh_dir("typo-config");
  std::ofstream(dir / "settings.json") << R"({"image-sise": 8})";
  r = run_capture("inspect --config " + (dir / "settings.json").string(), dir / "out.log");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("did you mean 'image-size'?"), std::string::npos) << r.out;
}

TEST(InputMessages, StepsAndEpochsTogetherNameWhereEachCameFrom) {
  const fs::path dir = fresh_dir("steps-epochs");
  Outcome r = inspect_root(dir, "", R"({"steps": "5", "epochs": "2"})");
  const std::string hp = (dir / "root/input/config/hyperparameters.json").string();
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("both steps and epochs are set ('steps' in " + hp + ", 'epochs' in " + hp +
                       "): give one of them"),
            std::string::npos)
      << r.out;
  const fs::path dir2 = fresh_dir("steps-flag");
  r = inspect_root(dir2, "", R"({"epochs": "2"})", " --steps 5");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("(--steps, 'epochs' in " + (dir2 / "root/input/config/hyperparameters.json").string() + ")"),
            std::string::npos)
      << r.out;
}

TEST(InputMessages, APipelineTypoGetsTheNearestParameterOrStep) {
  const auto error_of = [](const std::string& text) {
    try {
      tandem::data::parse_pipeline(text);
    } catch (const tandem::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string param = error_of("decode,color_jitter(contrst=0.4)");
  EXPECT_NE(param.find("color_jitter has no parameter 'contrst': did you mean 'contrast'? Its parameters: brightness, "
                       "contrast, saturation, hue, p"),
            std::string::npos)
      << param;
  EXPECT_NE(error_of("decode,hflp").find("unknown step 'hflp': did you mean 'hflip'?"), std::string::npos);
  EXPECT_EQ(error_of("decode,color_jitter(zzzzzzz=1)").find("did you mean"), std::string::npos);
  // From a settings file, as SageMaker would pass it, to a trainer that builds the dataset.
  const fs::path dir = fresh_dir("typo-pipeline");
  using namespace tandem::data::testing;
  write_bytes(dir / "images/cats/c.png", encode_png(gradient_image(16, 16, 3, 1), PNG_FORMAT_RGB));
  fs::create_directories(dir / "root/input/config");
  std::ofstream(dir / "root/input/config/hyperparameters.json")
      << R"j({"data": "imagefolder:)j" << (dir / "images").string()
      << R"j(", "pipeline": "decode,color_jitter(contrst=0.4)"})j";
  const Outcome r = run_capture("trainer --steps 1 --sagemaker-root " + (dir / "root").string(), dir / "out.log", 60);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("did you mean 'contrast'?"), std::string::npos) << r.out;
}

TEST(InputMessages, HelpShowsTheFusedOptimizerAsOnByDefault) {
  const Outcome r = run_capture("trainer --help", fresh_dir("help-fused") / "out.log");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("{false}"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--fused-optimizer,--no-fused-optimizer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on by default"), std::string::npos) << r.out;
}

TEST(InputMessages, PinningMoreCoresThanTheMachineHasIsNamed) {
  using tandem::launch::oversubscription;
  EXPECT_EQ(oversubscription(0, 3, 2), "") << "no pinning";
  EXPECT_EQ(oversubscription(1, 2, 2), "");
  EXPECT_EQ(oversubscription(4, 3, 2),
            "--cpus-per-host 4 x 3 hosts asks for 12 cores, but this machine has 2: hosts share cores, so the rates "
            "measured here are lower than separate hosts would reach; give --cpus-per-host 0 (no pinning): there are "
            "fewer cores than hosts");
  EXPECT_NE(oversubscription(2, 2, 2).find("give at most --cpus-per-host 1 (or 0: no pinning)"), std::string::npos);
  EXPECT_NE(oversubscription(8, 3, 16).find("give at most --cpus-per-host 5"), std::string::npos);
}

}  // namespace
