// The Python processes of --data python:FILE:NAME (process_pool.h): started, leased one
// per sample, restarted when they die or hang. Their messages: pool_channel.h.
#include "tandem/data/python/process_pool.h"

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
#include "tandem/data/batching/thread_pool.h"

namespace tandem::data {
namespace fs = std::filesystem;
using pool::ProcessGone;
using pool::ProcessSlow;
namespace {

constexpr size_t kMaxShmBytes = size_t{4} << 30;
constexpr int kChildSocketFd = 3, kChildShmFd = 4;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// A fd number above the ones the child is given.
int high_fd(int fd) {
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  if (moved < 0) throw ConfigError(errno_text("fcntl"));
  return moved;
}

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

}  // namespace

// One Python process: its pid, its end of the socketpair and its shared memory.
struct PythonProcessPool::Process {
  pool::Channel channel;  // its pid, socket and pidfd
  pid_t& pid = channel.pid;
  int shm = -1;
  std::byte* map = nullptr;
  size_t mapped = 0;
  bool busy = false;  // GUARDED_BY(pool mu_)

  ~Process() { stop(1.0); }

  void start(const PythonPoolOptions& opts);
  void stop(double grace_s);
  void close_all();
  void remap(size_t size);
  void grow(size_t size);
  SampleFields fields_of(const nlohmann::json& reply);
};

// The process leads its own process group (a terminal's Ctrl-C is the worker's to handle,
// and what the dataset forks is ended with it) and dies with the worker (spawn.h).
void PythonProcessPool::Process::start(const PythonPoolOptions& opts) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) throw ConfigError(errno_text("socketpair"));
  channel.sock = pair[0];
  const int theirs = high_fd(pair[1]);
  shm = ::memfd_create("tandem-python-sample", MFD_CLOEXEC);
  if (shm < 0 || ::ftruncate(shm, static_cast<off_t>(opts.initial_shm_bytes)) != 0) {
    ::close(theirs);
    throw ConfigError(errno_text("memfd_create"));
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

SampleFields PythonProcessPool::Process::fields_of(const nlohmann::json& reply) {
  const size_t size = reply.value("shm_size", size_t{0});
  if (size > mapped) remap(size);  // remap() refuses more than kMaxShmBytes
  return pool::fields_of(reply, map, mapped);
}

// --- the pool ------------------------------------------------------------------------------

namespace {

size_t shm_limit(const PythonPoolOptions& opts) { return opts.max_shm_bytes ? opts.max_shm_bytes : kMaxShmBytes; }

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20)); }

}  // namespace

PythonProcessPool::PythonProcessPool(PythonPoolOptions opts) : opts_(std::move(opts)) {
  const std::string what = "python:" + opts_.file + ":" + opts_.name;
  opts_.initial_shm_bytes = std::min(opts_.initial_shm_bytes, shm_limit(opts_));
  const int now = opts_.start_procs > 0 ? std::min(opts_.start_procs, opts_.procs) : opts_.procs;
  for (int i = 0; i < opts_.procs; ++i) {
    procs_.push_back(std::make_unique<Process>());
    if (i < now) procs_.back()->start(opts_);  // the others start in run() when first leased
  }
  const auto deadline = after(opts_.start_timeout_s);
  for (auto& p : procs_) {
    if (p->pid <= 0) continue;
    nlohmann::json reply;
    try {
      pool::send_message(p->channel, pool::init_request(opts_, shm_limit(opts_)), deadline);
      reply = pool::receive_message(p->channel, deadline);
    } catch (const ProcessGone& e) {
      throw ConfigError("the Python process for " + what + " ended while starting (" + reap(p->pid, after(1)) +
                        "; " + e.why + "): run `" + opts_.python + " -c 'import numpy'` to check the interpreter");
    } catch (const ProcessSlow&) {
      throw ConfigError("the Python process for " + what + " did not build the dataset within " +
                        std::to_string(static_cast<int>(opts_.start_timeout_s)) + " s: make its __init__ faster");
    }
    if (!reply.value("ok", false)) {
      throw ConfigError("cannot build the dataset " + what + ": " + pool::python_error(reply));
    }
    try {
      about_ = pool::about_of(reply);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError("the Python process for " + what + " answered its start oddly (" + std::string(e.what()) +
                        "): is " + opts_.script + " from this tandem?");
    }
  }
}

PythonProcessPool::~PythonProcessPool() {
  for (auto& p : procs_) p->close_all();  // all at once: each sees EOF; then ~Process reaps it
}

std::vector<pid_t> PythonProcessPool::pids() const {
  std::lock_guard lock(mu_);
  std::vector<pid_t> out;
  for (const auto& p : procs_) {
    if (p->pid > 0) out.push_back(p->pid);
  }
  return out;
}


// Holds one process for one sample; gives it back however the sample ends.
class PythonProcessPool::Lease {
 public:
  explicit Lease(const PythonProcessPool& pool) : pool_(pool), p_(pool.acquire()) {}
  ~Lease() { pool_.release(p_); }
  Process& operator*() const { return p_; }

 private:
  const PythonProcessPool& pool_;
  Process& p_;
};

PythonProcessPool::Process& PythonProcessPool::acquire() const {
  std::unique_lock lock(mu_);
  ++waiting_;
  // Each process ahead of us may take a whole sample, or a restart.
  const double budget = opts_.start_timeout_s + opts_.sample_timeout_s * (1.0 + double(waiting_) / procs_.size());
  const auto deadline = after(budget);
  Process* found = nullptr;
  const bool ok = freed_.wait_until(lock, deadline, [&] {
    for (auto& p : procs_) {  // a started process before one not yet started
      if (!p->busy && (!found || (found->pid <= 0 && p->pid > 0))) found = p.get();
    }
    return found != nullptr;
  });
  --waiting_;
  if (!ok) {
    throw DataError("no Python process of " + opts_.file + " became free within " +
                    std::to_string(static_cast<int>(budget)) + " s: raise --python-procs or --sample-timeout");
  }
  found->busy = true;
  return *found;
}

void PythonProcessPool::release(Process& p) const {
  {
    std::lock_guard lock(mu_);
    p.busy = false;
  }
  freed_.notify_one();
}

void PythonProcessPool::restart(Process& p) const {
  if (p.pid > 0) ::kill(-p.pid, SIGKILL);
  p.stop(0);
  p.start(opts_);
  const auto deadline = after(opts_.start_timeout_s);
  nlohmann::json reply;
  try {
    pool::send_message(p.channel, pool::init_request(opts_, shm_limit(opts_)), deadline);
    reply = pool::receive_message(p.channel, deadline);
  } catch (const ProcessGone& e) {
    throw DataError("a restarted Python process of " + opts_.file + " ended while starting: " + e.why);
  } catch (const ProcessSlow&) {
    throw DataError("a restarted Python process of " + opts_.file + " did not start within " +
                    std::to_string(static_cast<int>(opts_.start_timeout_s)) + " s");
  }
  if (!reply.value("ok", false)) throw DataError("a restarted Python process failed: " + pool::python_error(reply));
}

std::string PythonProcessPool::describe(uint64_t index) const {
  if (opts_.kind == PythonPoolOptions::Kind::kFunction) {
    return "sample " + std::to_string(index) + " in --pipeline step python(" + opts_.file + ":" + opts_.name + ")";
  }
  return "sample " + std::to_string(index) + " of python:" + opts_.file + ":" + opts_.name;
}

namespace {

std::string too_big(const std::string& which, size_t needed, const PythonPoolOptions& opts) {
  return which + " needs " + mib(needed) + " of shared memory, more than the " + mib(shm_limit(opts)) +
         " each of its " + std::to_string(opts.procs) + " Python processes may use (" + opts.shm_limit_setting +
         "): raise it, or lower --python-procs";
}

}  // namespace

void PythonProcessPool::run(uint64_t index, uint64_t seed, const std::function<void(const SampleFields&)>& use) const {
  serve(index, pool::get_request(index, seed), {}, use);
}

void PythonProcessPool::call(uint64_t index, uint64_t seed, std::span<const uint8_t> input,
                             const std::vector<int64_t>& shape, const std::function<void(const SampleFields&)>& use) const {
  if (input.size() > shm_limit(opts_)) throw PythonSampleError(too_big(describe(index), input.size(), opts_));
  serve(index, pool::call_request(index, seed, shape, input.size()), input, use);
}

void PythonProcessPool::serve(uint64_t index, const nlohmann::json& request, std::span<const uint8_t> input,
                              const std::function<void(const SampleFields&)>& use) const {
  std::string first_death;
  for (int attempt = 0;; ++attempt) {
    Lease lease(*this);
    Process& p = *lease;
    if (p.pid <= 0) restart(p);  // a restart that failed before, or one not started yet
    nlohmann::json reply;
    try {
      const auto deadline = after(opts_.sample_timeout_s);
      if (!input.empty()) {
        p.grow(input.size());
        std::memcpy(p.map, input.data(), input.size());
      }
      pool::send_message(p.channel, request, deadline);
      reply = pool::receive_message(p.channel, deadline);
    } catch (const ProcessSlow&) {
      spdlog::warn("{} took over {} s (--sample-timeout): killing its Python process {}", describe(index),
                   opts_.sample_timeout_s, p.pid);
      restart(p);
      throw PythonSampleError(describe(index) + fmt::format(" took over {} s", opts_.sample_timeout_s) +
                              ", and its process was killed: make it faster, or raise --sample-timeout");
    } catch (const ProcessGone& e) {
      const std::string how = reap(p.pid, after(1));
      spdlog::warn("the Python process {} making {} died ({}; {}): restarting it", p.pid, describe(index), how, e.why);
      p.pid = -1;
      restart(p);
      if (attempt == 0) {
        first_death = how;
        continue;
      }
      throw PythonSampleError(describe(index) + " killed its Python process twice (" + first_death + ", then " + how +
                              "): fix the crash, e.g. in a C extension, or check for the out-of-memory killer");
    }
    if (!reply.value("ok", false) && reply.contains("shm_needed")) {
      throw PythonSampleError(too_big(describe(index), reply.value("shm_needed", size_t{0}), opts_));
    }
    if (!reply.value("ok", false)) throw PythonSampleError(describe(index) + " raised " + pool::python_error(reply));
    SampleFields fields;
    try {
      fields = p.fields_of(reply);
    } catch (const ProcessGone& e) {
      throw PythonSampleError(describe(index) + ": its process sent a bad reply (" + e.why + ")");
    } catch (const nlohmann::json::exception& e) {
      throw PythonSampleError(describe(index) + ": its process sent a bad reply (" + std::string(e.what()) + ")");
    }
    use(fields);
    return;
  }
}

}  // namespace tandem::data
