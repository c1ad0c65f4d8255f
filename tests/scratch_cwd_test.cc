// Every test of this binary runs in a scratch working directory of its own, removed when
// the binary ends: a trainer run by hand writes ./tandem-output/<job> there (not into the
// build tree), so one test's checkpoints can never be resumed by another's run.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace {

// Moves into <scratch>/<suite>.<test> before each test.
class PerTest : public ::testing::EmptyTestEventListener {
 public:
  explicit PerTest(std::filesystem::path root) : root_(std::move(root)) {}
  void OnTestStart(const ::testing::TestInfo& test) override {
    const auto dir = root_ / (std::string(test.test_suite_name()) + "." + test.name());
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!ec) std::filesystem::current_path(dir, ec);
  }

 private:
  std::filesystem::path root_;
};

class ScratchWorkingDirectory : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "tandem-tests-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return;  // stay where ctest put us
    dir_ = pattern;
    std::filesystem::current_path(dir_);
    ::testing::UnitTest::GetInstance()->listeners().Append(new PerTest(dir_));
  }
  void TearDown() override {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::current_path(std::filesystem::temp_directory_path(), ec);
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  std::filesystem::path dir_;
};

const auto* const kScratch = ::testing::AddGlobalTestEnvironment(new ScratchWorkingDirectory);

}  // namespace

TEST(ScratchWorkingDirectory, TestsRunOutsideTheBuildTree) {
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_NE(cwd.find("tandem-tests-"), std::string::npos) << cwd;
}
