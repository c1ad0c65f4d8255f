// write_file_atomically's errors say what went wrong: a full disk with its free space, a
// read-only file system. Each case runs in a child process with a mount namespace of its
// own and a tiny tmpfs (nothing is mounted on the host); where mounting is not allowed
// (no CAP_SYS_ADMIN) the test is skipped, saying so.
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "process_helpers.h"
#include "tandem/common/files.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// Runs `write` in a child with `dir` a fresh 64 KiB tmpfs (read-only with `read_only`),
// and returns what write_file_atomically threw there ("" if nothing), or "skip: ..." when
// the child could not mount.
std::string error_in_small_tmpfs(const fs::path& dir, bool read_only, size_t bytes) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "skip: pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    auto say = [&](const std::string& s) {
      ssize_t ignored = write(pipe_fds[1], s.data(), s.size());
      (void)ignored;
      _exit(0);
    };
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", dir.c_str(), "tmpfs", read_only ? MS_RDONLY : 0, "size=64k") != 0) {
      say("skip: cannot mount a tmpfs here (needs CAP_SYS_ADMIN)");
    }
    try {
      write_file_atomically((dir / "model" / "model.json").string(), std::string(bytes, 'x'));
      say("");
    } catch (const std::exception& e) {
      say(e.what());
    }
  }
  close(pipe_fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

TEST(WriteFile, AFullDiskIsNamedWithItsFreeSpace) {
  const fs::path dir = testing::fresh_dir("files-full");
  const std::string error = error_in_small_tmpfs(dir, false, 1 << 20);
  if (error.rfind("skip: ", 0) == 0) GTEST_SKIP() << error.substr(6);
  EXPECT_NE(error.find("the disk is full ("), std::string::npos) << error;
  EXPECT_NE(error.find("KiB free in " + (dir / "model").string()), std::string::npos) << error;
  EXPECT_EQ(error.find("check the directory exists"), std::string::npos) << error;
  fs::remove_all(dir);
}

TEST(WriteFile, AReadOnlyFileSystemIsNamed) {
  const fs::path dir = testing::fresh_dir("files-ro");
  const std::string error = error_in_small_tmpfs(dir, true, 10);
  if (error.rfind("skip: ", 0) == 0) GTEST_SKIP() << error.substr(6);
  EXPECT_NE(error.find("read-only file system"), std::string::npos) << error;
  fs::remove_all(dir);
}

TEST(WriteFile, ASmallFileIsWrittenWhole) {
  const fs::path dir = testing::fresh_dir("files-ok");
  write_file_atomically((dir / "a" / "b.json").string(), "{\"x\": 1}");
  EXPECT_EQ(read_file((dir / "a" / "b.json").string()).value_or(""), "{\"x\": 1}");
  EXPECT_FALSE(fs::exists(dir / "a" / ("b.json.tmp." + std::to_string(getpid()))));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem
