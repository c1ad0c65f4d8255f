// One Python process of the pool (pool_process.h): started through the one spawner,
// its shared memory mapped and grown, stopped with its whole process group.
#include "pool_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pool_channel.h"
#include "tandem/common/clock.h"
#include "tandem/common/spawn.h"
#include "tandem/common/text.h"

namespace tandem::data {
namespace fs = std::filesystem;
using pool::ProcessGone;
using pool::ProcessSlow;
namespace {

constexpr int kChildSocketFd = 3, kChildShmFd = 4;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// A fd number above the ones the child is given.
int high_fd(int fd) {
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  if (moved < 0) throw Error(errno_text("fcntl"));
  return moved;
}

}  // namespace

// Waits for `pid` to end (SIGKILL at `deadline`), ends what it left in its process group
// (children a dataset forked) while its id is still the group's, and reaps it: "killed
// by signal 9 (Killed)" / "exited with status 3".
std::string reap(pid_t pid, Clock::time_point deadline) {
  siginfo_t info{};
  for (bool killed = false;;) {
    info.si_pid = 0;
    const int flags = WEXITED | WNOWAIT | (killed ? 0 : WNOHANG);
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, flags) == 0 && info.si_pid == pid) break;
    if (errno == ECHILD) return "already reaped";
    if (!killed && Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      killed = true;
    }
    if (!killed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(-pid, SIGKILL);  // the group outlives its leader only through what the leader started
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// The process leads its own process group (a terminal's Ctrl-C is the worker's to handle,
// and what the dataset forks is ended with it) and dies with the worker (spawn.h).
void PythonProcessPool::Process::start(const PythonPoolOptions& opts) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) throw Error(errno_text("socketpair"));
  channel.sock = pair[0];
  const int theirs = high_fd(pair[1]);
  shm = ::memfd_create("tandem-python-sample", MFD_CLOEXEC);
  if (shm < 0 || ::ftruncate(shm, static_cast<off_t>(opts.initial_shm_bytes)) != 0) {
    ::close(theirs);
    throw Error(errno_text("memfd_create"));
  }
  shm = high_fd(shm);
  remap(opts.initial_shm_bytes);
  SpawnSpec spec;
  spec.argv = {opts.python, opts.script, std::to_string(kChildSocketFd), std::to_string(kChildShmFd)};
  spec.fds = {{theirs, kChildSocketFd}, {shm, kChildShmFd}};
  Spawned child;
  try {
    child = spawn_process(spec);
  } catch (const std::exception& e) {
    ::close(theirs);
    throw ConfigError("cannot start the Python interpreter '" + opts.python + "': " + e.what());
  }
  ::close(theirs);
  pid = child.pid;
  if (child.exec_errno != 0) {
    reap(pid, after(1));
    pid = -1;
    throw ConfigError("cannot start the Python interpreter '" + opts.python + "': " + std::strerror(child.exec_errno) +
                      ": install Python 3 with numpy, or pass --python PATH");
  }
  channel.pidfd = pool::open_pidfd(pid);
}

void PythonProcessPool::Process::remap(size_t size) {
  if (size > kMaxShmBytes) throw ProcessGone{"it asked for " + std::to_string(size >> 20) + " MiB of shared memory"};
  if (map) ::munmap(map, mapped);
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);  // call() writes its input
  if (m == MAP_FAILED) {
    map = nullptr;
    mapped = 0;
    throw ProcessGone{errno_text("mmap of its shared memory")};
  }
  map = static_cast<std::byte*>(m);
  mapped = size;
}

// Makes the shared memory at least `size` bytes (a python() step's input); the process
// sees the new size at its next request.
void PythonProcessPool::Process::grow(size_t size) {
  if (size <= mapped) return;
  if (::ftruncate(shm, static_cast<off_t>(size)) != 0) throw ProcessGone{errno_text("ftruncate of its shared memory")};
  remap(size);
}

void PythonProcessPool::Process::close_all() {
  if (map) ::munmap(map, mapped);
  map = nullptr;
  mapped = 0;
  for (int* fd : {&channel.sock, &shm, &channel.pidfd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void PythonProcessPool::Process::stop(double grace_s) {
  close_all();  // EOF: a process waiting for a request exits at once
  if (pid > 0) {
    ::kill(-pid, SIGTERM);  // the group: what the dataset forked goes too
    reap(pid, after(grace_s));
  }
  pid = -1;
}

std::pair<uint64_t, uint64_t> PythonProcessPool::Process::progress() const {
  uint64_t words[2] = {0, 1};
  // Written by the other process: a torn read only looks like progress.
  if (map != nullptr && mapped >= sizeof words) std::memcpy(words, map, sizeof words);
  return {words[0], std::max<uint64_t>(1, words[1])};
}

SampleFields PythonProcessPool::Process::fields_of(const nlohmann::json& reply) {
  const size_t size = reply.value("shm_size", size_t{0});
  if (size > mapped) remap(size);  // remap() refuses more than kMaxShmBytes
  return pool::fields_of(reply, map, mapped);
}

}  // namespace tandem::data
