// The command line as a user meets it: mistakes exit 2 (usage) with one message that
// names the nearest valid command or flag; bad settings files exit 1 naming the file.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "process_helpers.h"

namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;

Outcome tandem_run(const std::string& args, const std::string& name) {
  return run_capture(args, fresh_dir(name) / "out.log");
}

TEST(CommandLine, ATypoedCommandSuggestsTheNearestAndExitsTwo) {
  const Outcome r = tandem_run("lauch", "cli-command");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown command 'lauch', did you mean 'launch'?"), std::string::npos) << r.out;
  const Outcome far = tandem_run("xyzzy", "cli-far");
  EXPECT_EQ(far.code, 2);
  EXPECT_EQ(far.out.find("did you mean"), std::string::npos) << "no guess for a word like no command: " << far.out;
  EXPECT_NE(far.out.find("Commands: launch"), std::string::npos) << far.out;
}

TEST(CommandLine, ATypoedFlagSuggestsTheNearestOfThatCommand) {
  Outcome r = tandem_run("launch --stepz 3", "cli-flag");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown flag '--stepz' for 'tandem launch', did you mean '--steps'?"), std::string::npos)
      << r.out;
  r = tandem_run("inspect --workres=a", "cli-flag-eq");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("did you mean '--workers'?"), std::string::npos) << r.out;
}

TEST(CommandLine, AFlagGivenTwiceSaysSo) {
  const Outcome r = tandem_run("worker --port 7001 --port 7002", "cli-twice");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--port is given 2 times: it takes one value, so give it once (tandem worker --help)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("At Most"), std::string::npos) << r.out;
}

TEST(CommandLine, BadValuesExitTwoWithTheRangeAsWritten) {
  Outcome r = tandem_run("worker --threads=-3", "cli-range");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--threads: -3 is out of range: use 0 to 1000000000"), std::string::npos) << r.out;
  r = tandem_run("trainer --lr abc", "cli-nan");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("'abc' is not a number"), std::string::npos) << r.out;
  r = tandem_run("", "cli-none");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("A subcommand is required"), std::string::npos) << r.out;
}

// A command's own command (bench pipeline) is where its flags and values are checked: a bad
// value is named as such, not as an unknown flag of the parent command.
TEST(CommandLine, ACommandsOwnCommandNamesItsBadValuesAndTypos) {
  Outcome r = tandem_run("bench pipeline --data synthetic --seconds -1", "cli-nested-range");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--seconds: -1 is out of range"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(tandem bench pipeline --help)"), std::string::npos) << r.out;
  r = tandem_run("bench pipeline --io-threads many", "cli-nested-nan");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--io-threads: 'many' is not a number"), std::string::npos) << r.out;
  r = tandem_run("bench pipeline --treads 2", "cli-nested-typo");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown flag '--treads' for 'tandem bench pipeline', did you mean '--threads'?"),
            std::string::npos) << r.out;
}

// The user's program goes after `--`: a bad value before it is named as such; `--` with
// nothing after it, or a program without `--`, is a usage error saying where it goes.
TEST(CommandLine, TheProgramGoesAfterTheSeparator) {
  Outcome r = tandem_run("launch --stop-grace -1 -- /bin/true", "cli-sep-range");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--stop-grace: -1 is out of range"), std::string::npos) << r.out;
  r = tandem_run("launch --procs-per-host 1 --", "cli-sep-empty");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("nothing follows --: give the program to run after it"), std::string::npos) << r.out;
  r = tandem_run("simulate echo hi --steps 3", "cli-sep-missing");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("put -- before your program (tandem simulate [flags] -- PROGRAM ARGS...)"), std::string::npos)
      << r.out;
  r = tandem_run("launch --command python3 -- train.py", "cli-sep-twice");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the program is given twice, with --command and after --"), std::string::npos) << r.out;
}

TEST(CommandLine, HelpAndVersionExitZero) {
  EXPECT_EQ(tandem_run("--help", "cli-help").code, 0);
  EXPECT_EQ(tandem_run("launch --help", "cli-help-launch").code, 0);
  const Outcome v = tandem_run("--version", "cli-version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("tandem 0.1.0"), std::string::npos) << v.out;
}

// A settings file is a configuration mistake (exit 1), named with its problem.
TEST(CommandLine, ASettingsFileThatIsNotAnObjectOrHasAWrongTypeIsNamed) {
  const fs::path dir = fresh_dir("cli-config");
  std::ofstream(dir / "list.json") << R"(["steps", 3])";
  std::ofstream(dir / "typed.json") << R"({"steps": {"n": 3}})";
  std::ofstream(dir / "text.json") << R"({"batch-size": "many"})";
  for (const auto& [file, words] : std::vector<std::pair<std::string, std::string>>{
           {"list.json", "object"}, {"typed.json", "steps"}, {"text.json", "batch-size"}}) {
    const int code = run_tandem("inspect --sagemaker-root /nonexistent --config " + (dir / file).string(),
                                dir / (file + ".log"), 30);
    const std::string out = slurp(dir / (file + ".log"));
    EXPECT_EQ(code, 3) << "configuration: " << file << ": " << out;
    EXPECT_NE(out.find(words), std::string::npos) << file << ": " << out;
    EXPECT_NE(out.find(file), std::string::npos) << "the message names the file: " << out;
  }
}

}  // namespace
