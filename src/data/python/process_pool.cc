// The Python processes of --data python:FILE:NAME (process_pool.h), and their protocol
// (python/tandem/_dataset_worker.py): 4-byte little-endian length + JSON per message on a
// socketpair, arrays in a memfd both sides map.
#include "tandem/data/python/process_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/clock.h"
#include "tandem/common/text.h"
#include "tandem/data/batching/thread_pool.h"

extern char** environ;

namespace tandem::data {
namespace fs = std::filesystem;
namespace {

constexpr uint32_t kMaxMessageBytes = 64u << 20;  // a traceback or a field list, never array data
constexpr size_t kMaxShmBytes = size_t{4} << 30;
constexpr int kChildSocketFd = 3, kChildShmFd = 4;

// Why talking to a process stopped: it is gone, or it took too long.
struct ProcessGone {
  std::string why;
};
struct ProcessSlow {};

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Waits until `fd` is ready for `events` or `deadline`; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const double left = seconds_between(Clock::now(), deadline);
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min(left * 1000 + 1, 1e9)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) throw ProcessGone{errno_text("poll")};
  }
}

void send_all(int fd, const std::string& data, Clock::time_point deadline) {
  for (size_t done = 0; done < data.size();) {
    if (!wait_fd(fd, POLLOUT, deadline)) throw ProcessSlow{};
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw ProcessGone{errno_text("send")};
    done += static_cast<size_t>(n);
  }
}

void receive_all(int fd, char* out, size_t size, Clock::time_point deadline) {
  for (size_t done = 0; done < size;) {
    if (!wait_fd(fd, POLLIN, deadline)) throw ProcessSlow{};
    const ssize_t n = ::recv(fd, out + done, size - done, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) throw ProcessGone{"its socket closed"};
    if (n < 0) throw ProcessGone{errno_text("recv")};
    done += static_cast<size_t>(n);
  }
}

void send_message(int fd, const nlohmann::json& message, Clock::time_point deadline) {
  const std::string body = message.dump();
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string framed(reinterpret_cast<const char*>(&n), 4);  // little-endian: x86-64 and arm64
  send_all(fd, framed + body, deadline);
}

nlohmann::json receive_message(int fd, Clock::time_point deadline) {
  uint32_t n = 0;
  receive_all(fd, reinterpret_cast<char*>(&n), 4, deadline);
  if (n > kMaxMessageBytes) throw ProcessGone{"it sent a message of " + std::to_string(n) + " bytes"};
  std::string body(n, '\0');
  receive_all(fd, body.data(), n, deadline);
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) throw ProcessGone{"it sent something that is not a JSON object"};
  return j;
}

// A fd number above the ones the child is given, so that dup2 in the child always
// copies it (a dup2 onto itself would keep FD_CLOEXEC).
int high_fd(int fd) {
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  if (moved < 0) throw ConfigError(errno_text("fcntl"));
  return moved;
}

// "killed by signal 9 (Killed)" / "exited with status 3", after reaping `pid`.
std::string reap(pid_t pid, Clock::time_point deadline) {
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// "ValueError: bad (my_data.py:12)\n  last frames", from a failure reply.
std::string python_error(const nlohmann::json& reply) {
  std::string out = reply.value("error", std::string("an error without a message"));
  const std::string where = reply.value("where", std::string());
  const std::string trace = reply.value("traceback", std::string());
  if (!where.empty()) out += " (at " + where + ")";
  if (!trace.empty()) out += "\n" + trace;
  return out;
}

}  // namespace

// One Python process: its pid, its end of the socketpair and its shared memory.
struct PythonProcessPool::Process {
  pid_t pid = -1;
  int sock = -1;
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

void PythonProcessPool::Process::start(const PythonPoolOptions& opts) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) throw ConfigError(errno_text("socketpair"));
  sock = pair[0];
  const int theirs = high_fd(pair[1]);
  shm = ::memfd_create("tandem-python-sample", MFD_CLOEXEC);
  if (shm < 0 || ::ftruncate(shm, static_cast<off_t>(opts.initial_shm_bytes)) != 0) {
    ::close(theirs);
    throw ConfigError(errno_text("memfd_create"));
  }
  shm = high_fd(shm);
  remap(opts.initial_shm_bytes);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, theirs, kChildSocketFd);
  posix_spawn_file_actions_adddup2(&actions, shm, kChildShmFd);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);   // the worker blocks SIGTERM/SIGINT in its threads
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a terminal's Ctrl-C is the worker's to handle
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const std::string sock_arg = std::to_string(kChildSocketFd), shm_arg = std::to_string(kChildShmFd);
  std::vector<char*> argv = {const_cast<char*>(opts.python.c_str()), const_cast<char*>(opts.script.c_str()),
                             const_cast<char*>(sock_arg.c_str()), const_cast<char*>(shm_arg.c_str()), nullptr};
  const int rc = ::posix_spawnp(&pid, opts.python.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(theirs);
  if (rc != 0) {
    pid = -1;
    throw ConfigError("cannot start the Python interpreter '" + opts.python + "': " + std::strerror(rc) +
                      ": install Python 3 with numpy, or pass --python PATH");
  }
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
  for (int* fd : {&sock, &shm}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void PythonProcessPool::Process::stop(double grace_s) {
  close_all();  // EOF: a process waiting for a request exits at once
  if (pid > 0) {
    ::kill(pid, SIGTERM);
    reap(pid, after(grace_s));
  }
  pid = -1;
}

SampleFields PythonProcessPool::Process::fields_of(const nlohmann::json& reply) {
  const size_t size = reply.value("shm_size", size_t{0});
  if (size > mapped) remap(size);  // remap() refuses more than kMaxShmBytes
  SampleFields out;
  for (const auto& [name, f] : reply.at("fields").items()) {
    SampleField field;
    field.dtype = f.value("dtype", std::string("?"));
    if (f.contains("shape") && f["shape"].is_array()) field.shape = f["shape"].get<std::vector<int64_t>>();
    if (f.contains("nbytes")) {
      const size_t offset = f.at("offset").get<size_t>(), bytes = f.at("nbytes").get<size_t>();
      if (offset > mapped || bytes > mapped - offset) throw ProcessGone{"it placed field '" + name + "' outside its shared memory"};
      field.is_array = true;
      field.bytes = {map + offset, bytes};
    } else if (f.contains("value")) {
      const nlohmann::json& v = f["value"];
      field.integer = v.is_number_integer() || v.is_boolean() ? v.get<int64_t>() : 0;
      field.real = v.is_number() ? v.get<double>() : static_cast<double>(field.integer);
    }
    out.emplace_back(name, std::move(field));
  }
  return out;
}

// --- the pool ------------------------------------------------------------------------------

namespace {

size_t shm_limit(const PythonPoolOptions& opts) { return opts.max_shm_bytes ? opts.max_shm_bytes : kMaxShmBytes; }

nlohmann::json init_request(const PythonPoolOptions& opts) {
  return {{"op", "init"}, {"file", opts.file}, {"name", opts.name}, {"args", nlohmann::json::parse(opts.args_json)},
          {"kind", opts.kind == PythonPoolOptions::Kind::kFunction ? "function" : "dataset"},
          {"max_shm", shm_limit(opts)}};
}

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20)); }

PythonDatasetAbout about_of(const nlohmann::json& reply) {
  PythonDatasetAbout about;
  about.len = reply.at("len").get<uint64_t>();
  if (reply.contains("num_classes") && reply["num_classes"].is_number_integer()) {
    about.num_classes = reply["num_classes"].get<int64_t>();
  }
  if (reply.contains("classes") && reply["classes"].is_array()) {
    about.classes = reply["classes"].get<std::vector<std::string>>();
  }
  if (reply.contains("ragged_fields") && reply["ragged_fields"].is_array()) {
    about.ragged_fields = reply["ragged_fields"].get<std::vector<std::string>>();
  }
  return about;
}

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
      send_message(p->sock, init_request(opts_), deadline);
      reply = receive_message(p->sock, deadline);
    } catch (const ProcessGone& e) {
      throw ConfigError("the Python process for " + what + " ended while starting (" + reap(p->pid, after(1)) +
                        "; " + e.why + "): run `" + opts_.python + " -c 'import numpy'` to check the interpreter");
    } catch (const ProcessSlow&) {
      throw ConfigError("the Python process for " + what + " did not build the dataset within " +
                        std::to_string(static_cast<int>(opts_.start_timeout_s)) + " s: make its __init__ faster");
    }
    if (!reply.value("ok", false)) {
      throw ConfigError("cannot build the dataset " + what + ": " + python_error(reply));
    }
    try {
      about_ = about_of(reply);
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
  if (p.pid > 0) ::kill(p.pid, SIGKILL);
  p.stop(0);
  p.start(opts_);
  const auto deadline = after(opts_.start_timeout_s);
  nlohmann::json reply;
  try {
    send_message(p.sock, init_request(opts_), deadline);
    reply = receive_message(p.sock, deadline);
  } catch (const ProcessGone& e) {
    throw DataError("a restarted Python process of " + opts_.file + " ended while starting: " + e.why);
  } catch (const ProcessSlow&) {
    throw DataError("a restarted Python process of " + opts_.file + " did not start within " +
                    std::to_string(static_cast<int>(opts_.start_timeout_s)) + " s");
  }
  if (!reply.value("ok", false)) throw DataError("a restarted Python process failed: " + python_error(reply));
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
  serve(index, {{"op", "get"}, {"index", index}, {"seed", seed}}, {}, use);
}

void PythonProcessPool::call(uint64_t index, uint64_t seed, std::span<const uint8_t> input,
                             const std::vector<int64_t>& shape, const std::function<void(const SampleFields&)>& use) const {
  if (input.size() > shm_limit(opts_)) throw PythonSampleError(too_big(describe(index), input.size(), opts_));
  serve(index, {{"op", "call"}, {"index", index}, {"seed", seed}, {"shape", shape}, {"nbytes", input.size()}}, input, use);
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
      send_message(p.sock, request, deadline);
      reply = receive_message(p.sock, deadline);
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
    if (!reply.value("ok", false)) throw PythonSampleError(describe(index) + " raised " + python_error(reply));
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

// --python, else $TANDEM_PYTHON (the wheel's `tandem` command sets it to the Python it was
// installed into), else /usr/bin/python3, else python3 on PATH.
std::string python_interpreter(const DataOptions& opts) {
  std::error_code ec;
  if (!opts.python.empty()) return opts.python;
  if (const char* env = std::getenv("TANDEM_PYTHON"); env && *env) return env;
  return fs::exists("/usr/bin/python3", ec) ? "/usr/bin/python3" : "python3";
}

PythonPoolOptions python_runtime_options(const DataOptions& opts) {
  PythonPoolOptions p;
  p.python = python_interpreter(opts);
  p.procs = opts.python_procs > 0 ? opts.python_procs : available_cores();
  p.sample_timeout_s = opts.sample_timeout_s;
  p.script = find_dataset_worker();
  p.start_procs = opts.python_start_procs;
  if (opts.python_shm_bytes > 0) {
    p.max_shm_bytes = std::max<size_t>(opts.python_shm_bytes / p.procs, 1);
    p.shm_limit_setting = "half of --max-inflight-mb, shared by the " + std::to_string(p.procs) + " --python-procs";
  }
  return p;
}

std::string find_dataset_worker() {
  if (const char* env = std::getenv("TANDEM_DATASET_WORKER"); env && *env) {
    if (!fs::is_regular_file(env)) {
      throw ConfigError("TANDEM_DATASET_WORKER=" + std::string(env) + " is not a file: point it at _dataset_worker.py");
    }
    return env;
  }
  std::error_code ec;
  const fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  std::vector<fs::path> places = {dir / "python/tandem", dir / "../python/tandem", dir / "../share/tandem/python/tandem"};
  std::string looked;
  for (const fs::path& place : places) {
    const fs::path candidate = (place / "_dataset_worker.py").lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  throw ConfigError("cannot find tandem's _dataset_worker.py (looked at " + looked +
                    "): build the target tandem_python_files, install tandem, or set TANDEM_DATASET_WORKER");
}

}  // namespace tandem::data
