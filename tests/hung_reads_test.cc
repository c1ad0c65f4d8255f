// A read that never returns (a hung NFS server; here a FUSE file system whose reads sleep
// for an hour, tests/fixtures/hung_fs.py) cannot hold a trainer or a data worker for good
// (issue 51: both outlived SIGTERM, a trainer failed at --batch-timeout and never
// exited): once their work is done or failed, each ends within kEndingS whatever its
// threads wait on, saying so. Real processes; needs /dev/fuse and python3-fusepy (root).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "process_helpers.h"
#include "tandem/common/exit_codes.h"
#include "tandem/common/exit_deadline.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using namespace tandem::testing;

// The hung file system, mounted for the test's life; a dead mount is taken away after.
class HungFs {
 public:
  explicit HungFs(const fs::path& dir) : mount_(dir / "mnt") {
    fs::create_directories(mount_);
    const fs::path log = dir / "fs.log";
    pid_ = fork();
    if (pid_ == 0) {
      const std::string cmd = "exec /usr/bin/python3 " + std::string(TANDEM_FIXTURES) + "/hung_fs.py " +
                              mount_.string() + " > " + log.string() + " 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    mounted_ = wait_for_text(log, "mounted", 20s);
    why_ = slurp(log);
  }
  ~HungFs() { stop(); }
  // Kills the file system: the reads it held fail (ENOTCONN), so their threads end.
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    std::system(("umount -l " + mount_.string() + " 2>/dev/null").c_str());
  }
  bool mounted() const { return mounted_; }
  const std::string& why() const { return why_; }
  const fs::path& root() const { return mount_; }

 private:
  fs::path mount_;
  pid_t pid_ = -1;
  bool mounted_ = false;
  std::string why_;
};

constexpr auto kEnds = std::chrono::seconds(static_cast<int>(kEndingS) + 25);

// Whether process `pid` ended what it could within `timeout`: exited, or a zombie. A
// thread asleep in a read of the hung file system keeps the kernel from reaping it (as on
// a hung NFS mount) until that read ends; the process itself has ended.
bool ends(pid_t pid, std::chrono::seconds timeout) {
  for (const auto deadline = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < deadline;) {
    const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos || stat.compare(paren + 2, 1, "Z") == 0) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// Its local preprocessing threads stuck in reads, the trainer fails at --batch-timeout
// and exits (5, a peer's fault) within kEndingS, naming what did not end.
TEST(HungReads, ATrainerWhoseReadsHangFailsAndExits) {
  const fs::path dir = fresh_dir("hung-trainer");
  HungFs hung(dir);
  ASSERT_TRUE(hung.mounted()) << "could not mount the hung file system (FUSE): " << hung.why();
  Child trainer = spawn("trainer --sagemaker-root " + (dir / "root").string() + " --data imagefolder:" +
                            hung.root().string() + " --image-size 16 --steps 4 --batch-size 2 --local-workers 2 " +
                            "--io-engine threads --batch-timeout 3",
                        dir / "trainer.log");
  EXPECT_TRUE(ends(trainer.pid, kEnds + 10s)) << slurp(dir / "trainer.log");
  hung.stop();
  const int code = wait_exit(trainer, 30s);
  const std::string log = slurp(dir / "trainer.log");
  EXPECT_EQ(code, kExitPeer) << log;
  EXPECT_NE(log.find("did not end within"), std::string::npos) << log;
}

// A worker whose reads hang, released by its failed trainer, exits (0, as released)
// within kEndingS, where it waited for SIGKILL; and one stopped by SIGTERM exits too (75).
TEST(HungReads, AWorkerWhoseReadsHangEndsWhenReleasedOrStopped) {
  for (const bool released : {true, false}) {
    SCOPED_TRACE(released ? "released" : "SIGTERM");
    const fs::path dir = fresh_dir(released ? "hung-worker-released" : "hung-worker-stopped");
    HungFs hung(dir);
    ASSERT_TRUE(hung.mounted()) << "could not mount the hung file system (FUSE): " << hung.why();
    const fs::path log = dir / "worker.log";
    Worker w = start_worker("--threads 2 --io-engine threads --term-grace 1 --data imagefolder:" +
                                hung.root().string() + " --image-size 16",
                            log);
    ASSERT_NE(w.port, 0) << slurp(log);
    // A trainer asks: the worker's threads go to read, and stay there. Released, the
    // worker is told by the trainer that fails at its --batch-timeout; else SIGTERM
    // comes while the trainer still waits.
    Child trainer = spawn("trainer --workers " + w.target() + " --data imagefolder:" + hung.root().string() +
                              " --image-size 16 --steps 2 --batch-size 2 --local-workers 0 --batch-timeout " +
                              (released ? "3" : "60") + " --sagemaker-root " + (dir / "root").string(),
                          dir / "trainer.log");
    if (released) {
      EXPECT_EQ(wait_exit(trainer, 60s), kExitPeer) << slurp(dir / "trainer.log");
    } else {
      ASSERT_TRUE(wait_for_text(log, "now belongs to", 30s)) << slurp(log);
      std::this_thread::sleep_for(1s);
      kill(w.child.pid, SIGTERM);
    }
    EXPECT_TRUE(ends(w.child.pid, kEnds)) << slurp(log);
    hung.stop();
    const int code = wait_exit(w.child, 30s);
    const std::string text = slurp(log);
    EXPECT_EQ(code, released ? kExitOk : kExitInterrupted) << text;
    EXPECT_NE(text.find("did not end within"), std::string::npos) << text;
    if (released) EXPECT_NE(text.find("trainer at ipv4:127.0.0.1:"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace tandem
