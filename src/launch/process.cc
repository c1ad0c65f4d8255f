#include "tandem/launch/process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include <spdlog/spdlog.h>

extern char** environ;

namespace tandem::launch {
namespace {

using Clock = std::chrono::steady_clock;

// A line longer than this is cut and emitted anyway, so a child printing without
// newlines (a progress bar, binary junk) cannot grow our memory without bound.
constexpr size_t kMaxLine = 1 << 20;
// Reads per pipe per poll round: a chatty child must not starve the others.
constexpr int kReadsPerRound = 16;
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// How long we keep waiting for children after SIGKILL. A process stuck in
// uninterruptible sleep can outlive SIGKILL; we give up on it rather than hang.
constexpr auto kKillWait = std::chrono::seconds(5);

Clock::duration seconds(double s) {
  // Clamp so an "infinite" timeout does not overflow the clock's representation.
  s = std::clamp(s, 0.0, 1e9);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "signal " + std::to_string(sig);
  }
}

// ---- Signals: self-pipe, so a signal wakes poll() like any other event ----------------

std::atomic<int> g_signal_write_fd{-1};
std::atomic<bool> g_supervising{false};

void on_signal(int sig) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  const int fd = g_signal_write_fd.load();
  if (fd >= 0) {
    // A full pipe drops the byte; there are plenty pending already, so nothing is lost.
    ssize_t ignored = write(fd, &byte, 1);
    (void)ignored;
  }
  errno = saved_errno;
}

// Catches SIGINT/SIGTERM for its lifetime and restores the previous handlers after.
class SignalCatcher {
 public:
  SignalCatcher() {
    if (g_supervising.exchange(true)) {
      throw std::runtime_error("supervise() is already running in this process");
    }
    if (pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
      g_supervising = false;
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    g_signal_write_fd = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    // Other threads' blocking calls should not see EINTR; our poll() wakes on the pipe.
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalCatcher() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_signal_write_fd = -1;
    close(fds_[0]);
    close(fds_[1]);
    g_supervising = false;
  }
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;

  int fd() const { return fds_[0]; }

  // The signals received since the last call.
  std::vector<int> take() {
    std::vector<int> sigs;
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(fds_[0], buf, sizeof buf)) > 0) sigs.insert(sigs.end(), buf, buf + n);
    return sigs;
  }

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// ---- Starting a child --------------------------------------------------------------------

// Everything the child needs, built before fork: between fork and exec only
// async-signal-safe calls are allowed (no allocation), since another thread may hold
// the allocator's lock at the moment of the fork.
struct ExecPlan {
  std::vector<std::string> env_strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
  cpu_set_t cpus;
  bool pin = false;
};

ExecPlan make_plan(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    throw std::runtime_error("cannot start '" + spec.name + "': empty command line");
  }
  ExecPlan plan;
  for (const auto& arg : spec.argv) plan.argv.push_back(const_cast<char*>(arg.c_str()));
  plan.argv.push_back(nullptr);

  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : spec.env) env[key] = value;
  for (const auto& [key, value] : env) plan.env_strings.push_back(key + "=" + value);
  for (auto& s : plan.env_strings) plan.envp.push_back(s.data());
  plan.envp.push_back(nullptr);

  CPU_ZERO(&plan.cpus);
  for (int cpu : spec.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      throw std::runtime_error("cannot start '" + spec.name + "': no such cpu " +
                               std::to_string(cpu));
    }
    CPU_SET(cpu, &plan.cpus);
    plan.pin = true;
  }
  return plan;
}

void child_write(const char* s) {
  ssize_t ignored = write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

[[noreturn]] void child_fail(const char* what, const char* arg, int err, int code) {
  child_write("tandem: ");
  child_write(what);
  child_write(" '");
  child_write(arg);
  child_write("': ");
  // strerrordesc_np, unlike strerror, never translates or allocates.
  const char* desc = strerrordesc_np(err);
  child_write(desc != nullptr ? desc : "unknown error");
  child_write("\n");
  _exit(code);
}

// Runs in the forked child; never returns.
[[noreturn]] void exec_child(const ExecPlan& plan, int out_fd, pid_t parent) {
  // Dispositions the parent chose (its handlers, or SIG_IGN from nohup) are not the
  // child's business, and the parent blocked SIGINT/SIGTERM around fork.
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // Its own group, so a stop signal also reaches whatever the child starts.
  setpgid(0, 0);
  // If the parent died before prctl took effect, nobody would ever kill us.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);

  if (out_fd <= STDERR_FILENO) out_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  // Children run in a background group and should never read the terminal.
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);

  if (plan.pin && sched_setaffinity(0, sizeof plan.cpus, &plan.cpus) != 0) {
    child_fail("cannot pin to the requested cpus for", plan.argv[0], errno, 126);
  }
  execvpe(plan.argv[0], plan.argv.data(), plan.envp.data());
  child_fail("cannot execute", plan.argv[0], errno, 127);
}

// Forks and execs one child whose stdout+stderr go to the returned pipe's read end.
pid_t spawn(const ProcessSpec& spec, int* read_fd) {
  const ExecPlan plan = make_plan(spec);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  // Blocked so that our handler never runs in the child between fork and exec.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) exec_child(plan, fds[1], parent);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    throw std::runtime_error("cannot start '" + spec.name + "': fork: " + std::strerror(fork_errno));
  }
  setpgid(pid, pid);  // also here, so signalling the group cannot race the child's own call
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  *read_fd = fds[0];
  return pid;
}

// ---- Supervision ---------------------------------------------------------------------------

struct Child {
  const ProcessSpec* spec = nullptr;
  pid_t pid = -1;
  int fd = -1;          // read end of the output pipe; -1 once closed
  std::string partial;  // output after the last newline
  bool running = false;
  ExitStatus status;
};

class Supervisor {
 public:
  Supervisor(const std::vector<ProcessSpec>& specs, const SuperviseOptions& opts)
      : opts_(opts), out_(opts.out != nullptr ? *opts.out : std::cout) {
    for (const auto& spec : specs) {
      children_.push_back(Child{});
      children_.back().spec = &spec;
      children_.back().status.name = spec.name;
    }
  }

  ~Supervisor() {
    // Only reached with live children if starting or pumping threw.
    if (live() > 0) {
      signal_live(SIGKILL);
      const auto give_up = Clock::now() + kKillWait;
      while (live() > 0 && Clock::now() < give_up) {
        for (auto& c : children_) {
          if (c.running && waitpid(c.pid, nullptr, WNOHANG) != 0) c.running = false;
        }
        usleep(10000);
      }
    }
    for (auto& c : children_) close_pipe(c);
  }

  std::vector<ExitStatus> run();

 private:
  void start_all();
  void poll_once();
  void on_signals();
  void reap();
  void on_exit(Child& c, int wstatus);
  void check_clock();
  void stop(const std::string& why, spdlog::level::level_enum level = spdlog::level::warn);
  void maybe_start_linger();
  void signal_live(int sig);
  void abandon_stuck();
  bool pump(Child& c, int max_reads);
  void emit_lines(Child& c, bool flush_partial);
  void drain_and_close(Child& c);
  void close_pipe(Child& c);
  int live() const;
  std::string live_names() const;
  std::string critical_names() const;

  const SuperviseOptions& opts_;
  std::ostream& out_;
  std::vector<Child> children_;
  SignalCatcher signals_;
  Clock::time_point deadline_;
  bool stopping_ = false;
  bool killed_ = false;
  // Every critical child has exited ok; the rest have until linger_end_ (linger_s >= 0).
  bool lingering_ = false;
  Clock::time_point linger_end_{};
  Clock::time_point term_sent_{};
  Clock::time_point kill_sent_{};
};

std::vector<ExitStatus> Supervisor::run() {
  start_all();
  deadline_ = Clock::now() + seconds(opts_.timeout_s);
  while (live() > 0) {
    poll_once();
    on_signals();
    reap();
    check_clock();
  }
  for (auto& c : children_) drain_and_close(c);
  std::vector<ExitStatus> result;
  for (const auto& c : children_) result.push_back(c.status);
  return result;
}

void Supervisor::start_all() {
  for (auto& c : children_) {
    c.pid = spawn(*c.spec, &c.fd);
    c.running = true;
    c.status.pid = c.pid;
    spdlog::info("started {} (pid {}): {}", c.spec->name, c.pid, c.spec->argv[0]);
  }
}

void Supervisor::poll_once() {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
  std::vector<Child*> owners{nullptr};
  for (auto& c : children_) {
    if (c.fd < 0) continue;
    fds.push_back({c.fd, POLLIN, 0});
    owners.push_back(&c);
  }
  const int timeout_ms = static_cast<int>(kPollInterval.count());
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;  // timeout or EINTR: just loop
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    // EOF only means the child closed its output; it is reaped separately.
    if (!pump(*owners[i], kReadsPerRound)) close_pipe(*owners[i]);
  }
}

void Supervisor::on_signals() {
  for (int sig : signals_.take()) {
    if (!stopping_) {
      stop("received " + signal_name(sig));
    } else if (!killed_) {
      spdlog::warn("received {} again; sending SIGKILL to {}", signal_name(sig), live_names());
      signal_live(SIGKILL);
      killed_ = true;
      kill_sent_ = Clock::now();
    }
  }
}

void Supervisor::reap() {
  for (auto& c : children_) {
    if (!c.running) continue;
    int wstatus = 0;
    const pid_t r = waitpid(c.pid, &wstatus, WNOHANG);
    if (r == c.pid) {
      on_exit(c, wstatus);
    } else if (r < 0 && errno == ECHILD) {
      // Someone else reaped it (a SIGCHLD=SIG_IGN elsewhere); its status is lost.
      c.running = false;
      spdlog::warn("{} (pid {}) was reaped elsewhere; exit status unknown", c.spec->name, c.pid);
    }
  }
}

void Supervisor::on_exit(Child& c, int wstatus) {
  c.running = false;
  if (WIFSIGNALED(wstatus)) {
    c.status.signal = WTERMSIG(wstatus);
  } else {
    c.status.exit_code = WEXITSTATUS(wstatus);
  }
  // Its last words belong before the line that reports its end.
  drain_and_close(c);
  if (c.status.ok() || stopping_) {
    spdlog::info("{} {}", c.spec->name, c.status.describe());
    if (c.status.ok() && c.spec->critical) maybe_start_linger();
    return;
  }
  if (!c.spec->critical) {
    spdlog::warn("{} {} (not critical; the others carry on)", c.spec->name, c.status.describe());
    return;
  }
  spdlog::error("{} {} and is critical", c.spec->name, c.status.describe());
  if (live() > 0) stop(c.spec->name + " " + c.status.describe());
}

// Starts the linger clock once the last critical child has exited ok.
void Supervisor::maybe_start_linger() {
  if (stopping_ || lingering_ || !(opts_.linger_s >= 0) || live() == 0) return;
  for (const auto& c : children_) {
    if (c.spec->critical && (c.running || !c.status.ok())) return;
  }
  lingering_ = true;
  linger_end_ = Clock::now() + seconds(opts_.linger_s);
  spdlog::info("every critical child ({}) exited ok; giving {} {} s to exit on their own",
               critical_names(), live_names(), opts_.linger_s);
}

void Supervisor::check_clock() {
  const auto now = Clock::now();
  if (!stopping_ && now >= deadline_ && live() > 0) {
    spdlog::error("timeout of {}s reached", opts_.timeout_s);
    stop("timeout");
  }
  if (!stopping_ && lingering_ && now >= linger_end_ && live() > 0) {
    stop(fmt::format("every critical child ({}) exited ok; still running {} s later",
                     critical_names(), opts_.linger_s),
         spdlog::level::info);
  }
  if (stopping_ && !killed_ && now >= term_sent_ + seconds(opts_.grace_s) && live() > 0) {
    spdlog::warn("{} still running {}s after SIGTERM; sending SIGKILL", live_names(),
                 opts_.grace_s);
    signal_live(SIGKILL);
    killed_ = true;
    kill_sent_ = now;
  }
  if (killed_ && now >= kill_sent_ + kKillWait && live() > 0) abandon_stuck();
}

void Supervisor::stop(const std::string& why, spdlog::level::level_enum level) {
  spdlog::log(level, "{}: sending SIGTERM to {}", why, live_names());
  stopping_ = true;
  term_sent_ = Clock::now();
  signal_live(SIGTERM);
}

void Supervisor::signal_live(int sig) {
  for (const auto& c : children_) {
    if (!c.running) continue;
    if (kill(-c.pid, sig) != 0) kill(c.pid, sig);  // in case it is not (yet) a group leader
  }
}

void Supervisor::abandon_stuck() {
  for (auto& c : children_) {
    if (!c.running) continue;
    spdlog::error("{} (pid {}) survived SIGKILL for {}s; giving up on it", c.spec->name, c.pid,
                  std::chrono::duration_cast<std::chrono::seconds>(kKillWait).count());
    c.running = false;
  }
}

// Returns false at end of file (or a read error), true while the pipe is open.
bool Supervisor::pump(Child& c, int max_reads) {
  char buf[65536];
  for (int i = 0; i < max_reads; ++i) {
    const ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      c.partial.append(buf, static_cast<size_t>(n));
      emit_lines(c, false);
    } else if (n == 0) {
      return false;
    } else {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
  }
  return true;
}

void Supervisor::emit_lines(Child& c, bool flush_partial) {
  size_t start = 0;
  for (size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    out_ << '[' << c.spec->name << "] ";
    out_.write(c.partial.data() + start, static_cast<std::streamsize>(nl - start));
    out_ << '\n' << std::flush;
  }
  c.partial.erase(0, start);
  if (!c.partial.empty() && (flush_partial || c.partial.size() >= kMaxLine)) {
    out_ << '[' << c.spec->name << "] " << c.partial << '\n' << std::flush;
    c.partial.clear();
  }
}

void Supervisor::drain_and_close(Child& c) {
  // A bounded number of reads: a grandchild may still hold the pipe and keep writing.
  if (c.fd >= 0) pump(c, 64);
  close_pipe(c);
  emit_lines(c, true);
}

void Supervisor::close_pipe(Child& c) {
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
}

int Supervisor::live() const {
  return static_cast<int>(std::count_if(children_.begin(), children_.end(),
                                        [](const Child& c) { return c.running; }));
}

std::string Supervisor::live_names() const {
  std::string names;
  for (const auto& c : children_) {
    if (!c.running) continue;
    if (!names.empty()) names += ", ";
    names += c.spec->name;
  }
  return names;
}

std::string Supervisor::critical_names() const {
  std::string names;
  for (const auto& c : children_) {
    if (!c.spec->critical) continue;
    if (!names.empty()) names += ", ";
    names += c.spec->name;
  }
  return names;
}

}  // namespace

std::string ExitStatus::describe() const {
  if (signal != 0) return "killed by " + signal_name(signal);
  if (exit_code < 0) return "did not exit";
  return "exited " + std::to_string(exit_code);
}

std::vector<ExitStatus> supervise(const std::vector<ProcessSpec>& children,
                                  const SuperviseOptions& opts) {
  Supervisor supervisor(children, opts);
  return supervisor.run();
}

}  // namespace tandem::launch
