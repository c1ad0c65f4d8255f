// A finished run's weights are never lost to a model folder that cannot be written
// (issue: 300 steps of GPU time gone to a read-only model/): such a folder is refused
// before the first step, and one that becomes read-only during the run leaves the weights
// in a checkpoint, named, with exit 1; the next start writes the model from it. Each case
// runs the real trainer in a mount namespace of its own over a small tmpfs; where
// mounting is not allowed the test says so and skips.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::slurp;

const std::string kTrain = "trainer --local-workers 1 --train-threads 1 --batch-size 8 --image-size 16 --log-every 10";

// Runs `script` under sh in a private mount namespace; its exit code, or -2 when it could
// not mount (it touches `mounted` once it has).
int in_namespace(const fs::path& dir, const std::string& script) {
  const std::string cmd = "cd " + dir.string() + " && timeout -s KILL 300 unshare --mount --propagation private sh -c '" +
                          script + "' > " + (dir / "script.log").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  if (!fs::exists(dir / "mounted")) return -2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ModelFolder, AReadOnlyModelFolderIsRefusedBeforeTheFirstStep) {
  const fs::path dir = testing::fresh_dir("model-folder-ro");
  fs::create_directories(dir / "R/model");
  const std::string script = "mount -t tmpfs -o ro,size=1m tmpfs R/model && touch mounted && exec " +
                             std::string(TANDEM_BINARY) + " " + kTrain + " --steps 300 --sagemaker-root R > run.log 2>&1";
  const int code = in_namespace(dir, script);
  if (code == -2) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN): " << slurp(dir / "script.log");
  const std::string log = slurp(dir / "run.log");
  EXPECT_EQ(code, 3) << log;
  EXPECT_NE(log.find("this run could not keep what it trains: the final model: "), std::string::npos) << log;
  EXPECT_NE(log.find("read-only"), std::string::npos) << log;
  EXPECT_EQ(log.find("step=10 "), std::string::npos) << "it trained before refusing\n" << log;
  fs::remove_all(dir);
}

TEST(ModelFolder, AFolderThatTurnsReadOnlyKeepsTheWeightsInACheckpointAndTheNextStartWritesTheModel) {
  const fs::path dir = testing::fresh_dir("model-folder-turns-ro");
  fs::create_directories(dir / "R/model");
  const std::string run = std::string(TANDEM_BINARY) + " " + kTrain + " --steps 20000 --sagemaker-root R";
  // The folder turns read-only after step 20; once the run has failed it is fixed and the
  // run started again.
  const std::string script =
      "mount -t tmpfs -o size=4m tmpfs R/model && touch mounted && " + run + " > first.log 2>&1 & "
      "for i in $(seq 600); do grep -q \"step=20 \" first.log && break; sleep 0.1; done; "
      "mount -o remount,ro R/model; wait $!; echo $? > first.code; "
      "cp R/output/data/summary.json first-summary.json; cp R/output/failure first-failure; "
      "mount -o remount,rw R/model; " + run + " > second.log 2>&1; echo $? > second.code; "
      "ls R/model > second.model";
  const int code = in_namespace(dir, script);
  if (code == -2) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN): " << slurp(dir / "script.log");
  const std::string first = slurp(dir / "first.log");
  ASSERT_EQ(slurp(dir / "first.code"), "1\n") << first << slurp(dir / "script.log");
  EXPECT_NE(first.find("cannot write the trained model: "), std::string::npos) << first;
  EXPECT_NE(first.find("its weights (step 20000) are kept in the checkpoint in "), std::string::npos) << first;
  const auto summary = nlohmann::json::parse(slurp(dir / "first-summary.json"));
  EXPECT_NE(summary.value("model_error", "").find("read-only"), std::string::npos) << summary.dump(2);
  EXPECT_NE(slurp(dir / "first-failure").find("cannot write the trained model"), std::string::npos);
  // The next start resumes at the last step and writes the model at once.
  const std::string second = slurp(dir / "second.log");
  EXPECT_EQ(slurp(dir / "second.code"), "0\n") << second;
  EXPECT_NE(slurp(dir / "second.model").find("model.pt"), std::string::npos) << second;
  EXPECT_EQ(second.find("step=20 "), std::string::npos) << "it trained again\n" << second;
  fs::remove_all(dir);
}

// A disk that fills during the run (another writer): the final model cannot be written,
// nor a checkpoint, but the room held for the last records takes the summary and
// output/failure, both naming the full disk; no model.pt is left without its model.json.
TEST(ModelFolder, ADiskThatFillsStillGetsTheSummaryAndTheFailure) {
  const fs::path dir = testing::fresh_dir("model-folder-full");
  fs::create_directories(dir / "R");
  const std::string script =
      "mount -t tmpfs -o size=4m tmpfs R && touch mounted && " + std::string(TANDEM_BINARY) + " " + kTrain +
      " --steps 20000 --sagemaker-root R > run.log 2>&1 & "
      "for i in $(seq 600); do grep -q \"step=20 \" run.log && break; sleep 0.1; done; "
      "dd if=/dev/zero of=R/filler bs=4k > /dev/null 2>&1; wait $!; echo $? > code; ls -a R/model R/output > ls; "
      "cp R/output/data/summary.json summary.json; cp R/output/failure failure";
  const int code = in_namespace(dir, script);
  if (code == -2) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN): " << slurp(dir / "script.log");
  const std::string log = slurp(dir / "run.log");
  ASSERT_EQ(slurp(dir / "code"), "1\n") << log << slurp(dir / "script.log");
  EXPECT_NE(log.find("the disk is full"), std::string::npos) << log;
  const auto summary = nlohmann::json::parse(slurp(dir / "summary.json"));
  EXPECT_NE(summary.value("model_error", "").find("the disk is full"), std::string::npos) << summary.dump(2);
  EXPECT_NE(slurp(dir / "failure").find("the disk is full"), std::string::npos) << slurp(dir / "failure");
  const std::string listed = slurp(dir / "ls");
  EXPECT_EQ(listed.find("model.pt"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("model.json"), std::string::npos) << listed;
  EXPECT_EQ(listed.find(".tandem-reserve"), std::string::npos) << "the held room is given back\n" << listed;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem
