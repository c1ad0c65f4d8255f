#include "tandem/common/clock.h"
#include "tandem/launch/process.h"

#include "tandem/common/text.h"

#include "child_output.h"
#include "signal_pipe.h"
#include "tandem/common/signals.h"
#include "tandem/common/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

namespace tandem::launch {
namespace {


// Reads per pipe per poll round: a chatty child must not starve the others.
constexpr int kReadsPerRound = 16;
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// A stop signal this soon after the stop began is the same stop, not a second one that
// asks for SIGKILL.
constexpr auto kSameSignal = std::chrono::milliseconds(1000);
// How long what a child left running in its process group gets between SIGTERM and SIGKILL.
constexpr auto kLeftoverGrace = std::chrono::seconds(2);
// How long we keep waiting for children after SIGKILL. A process stuck in
// uninterruptible sleep can outlive SIGKILL; we give up on it rather than hang.
constexpr auto kKillWait = std::chrono::seconds(5);


// ---- Supervision ---------------------------------------------------------------------------

struct Child {
  const ProcessSpec* spec = nullptr;
  pid_t pid = -1;
  ChildOutput output;
  bool running = false;
  ExitStatus status;
};

class Supervisor {
 public:
  Supervisor(const std::vector<ProcessSpec>& specs, const SuperviseOptions& opts)
      : opts_(opts), out_(opts.out != nullptr ? *opts.out : std::cout) {
    for (const auto& spec : specs) {
      children_.push_back(Child{&spec, -1, ChildOutput(spec.name, out_, opts.tail_lines), false, {}});
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
    for (auto& c : children_) c.output.close();
  }

  std::vector<ExitStatus> run();

 private:
  void start_all();
  void poll_once();
  void on_signals();
  void reap();
  void on_exit(Child& c, int wstatus);
  void check_clock();
  void check_stop_when();
  void stop(const std::string& why, spdlog::level::level_enum level = spdlog::level::warn);
  void maybe_start_linger();
  void stop_if_helpers_failed();
  void signal_live(int sig);
  void abandon_stuck();
  void end_leftovers();
  void drain(Child& c);
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
    check_stop_when();
  }
  for (auto& c : children_) drain(c);
  end_leftovers();
  std::vector<ExitStatus> result;
  for (const auto& c : children_) result.push_back(c.status);
  return result;
}

// Starts `spec` (common/spawn.h) with its stdout and stderr on a pipe whose
// non-blocking read end goes to `*read_fd`.
pid_t start_child(const ProcessSpec& spec, int* read_fd) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  SpawnSpec s;
  s.argv = spec.argv;
  s.env = spec.env;
  s.cpus = spec.cpus;
  s.cwd = spec.cwd;
  s.output_fd = fds[1];
  Spawned child;
  try {
    child = spawn_process(s);
  } catch (const std::exception& e) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error("cannot start '" + spec.name + "': " + e.what());
  }
  close(fds[1]);  // a child that could not exec said why on the pipe and exits 127
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  *read_fd = fds[0];
  return child.pid;
}

void Supervisor::start_all() {
  for (auto& c : children_) {
    int fd = -1;
    c.pid = start_child(*c.spec, &fd);
    c.output.attach(fd);
    c.running = true;
    c.status.pid = c.pid;
    spdlog::info("started {} (pid {}): {}", c.spec->name, c.pid, c.spec->argv[0]);
  }
}

void Supervisor::poll_once() {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
  std::vector<Child*> owners{nullptr};
  for (auto& c : children_) {
    if (c.output.fd() < 0) continue;
    fds.push_back({c.output.fd(), POLLIN, 0});
    owners.push_back(&c);
  }
  const int timeout_ms = static_cast<int>(kPollInterval.count());
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;  // timeout or EINTR: just loop
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    // EOF only means the child closed its output; it is reaped separately.
    if (!owners[i]->output.pump(kReadsPerRound)) owners[i]->output.close();
  }
}

void Supervisor::on_signals() {
  for (int sig : signals_.take()) {
    if (opts_.signalled) *opts_.signalled = true;
    if (!stopping_) {
      stop("received " + signal_name(sig));
    } else if (Clock::now() < term_sent_ + kSameSignal) {
      // `timeout` and `tini -g` send one stop to the process and to its group: one stop.
      spdlog::debug("received {} again within {} ms of the stop: the same stop", signal_name(sig), kSameSignal.count());
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
  drain(c);
  if (c.status.ok() || stopping_) {
    spdlog::info("{} {}", c.spec->name, c.status.describe());
    if (c.status.ok() && c.spec->critical) maybe_start_linger();
    return;
  }
  if (!c.spec->critical) {
    spdlog::warn("{} {} (not critical; the others carry on)", c.spec->name, c.status.describe());
    stop_if_helpers_failed();
    return;
  }
  spdlog::error("{} {} and is critical", c.spec->name, c.status.describe());
  c.status.stopped_others = true;
  if (opts_.on_failure) opts_.on_failure(c.status);
  if (live() > 0) stop(c.spec->name + " " + c.status.describe());
}

void Supervisor::check_stop_when() {
  if (stopping_ || !opts_.stop_when || live() == 0) return;
  if (const std::string why = opts_.stop_when(); !why.empty()) stop(why, spdlog::level::err);
}

// Starts the linger clock once the last critical child has exited ok.
void Supervisor::maybe_start_linger() {
  if (stopping_ || lingering_ || !(opts_.linger_s >= 0) || live() == 0) return;
  for (const auto& c : children_) {
    if (c.spec->critical && (c.running || !c.status.ok())) return;
  }
  lingering_ = true;
  linger_end_ = Clock::now() + seconds(opts_.linger_s);
  spdlog::info("{} exited ok; giving {} {} s to exit on {} own", critical_names(), live_names(), opts_.linger_s,
               live() == 1 ? "its" : "their");
}

// With stop_when_helpers_fail: once every non-critical child has failed, the critical
// ones still running are stopped rather than left to wait for them.
void Supervisor::stop_if_helpers_failed() {
  if (!opts_.stop_when_helpers_fail || stopping_ || live() == 0) return;
  std::vector<std::string> helpers;
  for (const auto& c : children_) {
    if (c.spec->critical) continue;
    if (c.running || c.status.ok()) return;
    helpers.push_back(c.spec->name);
  }
  if (helpers.empty()) return;
  stop(fmt::format("{} failed", helpers.size() == 1 ? helpers[0] : "every non-critical child (" + joined(helpers, ", ") + ")"),
       spdlog::level::err);
}

void Supervisor::check_clock() {
  const auto now = Clock::now();
  if (!stopping_ && now >= deadline_ && live() > 0) {
    spdlog::error("timeout of {}s reached", opts_.timeout_s);
    stop("timeout");
  }
  if (!stopping_ && lingering_ && now >= linger_end_ && live() > 0) {
    stop(fmt::format("{} exited ok; still running {} s later", critical_names(), opts_.linger_s),
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
  signal_live(SIGCONT);  // a stopped rank (SIGSTOP, a debugger let go) handles it now, not at SIGKILL
}

void Supervisor::signal_live(int sig) {
  for (const auto& c : children_) {
    if (!c.running) continue;
    if (kill(-c.pid, sig) != 0) kill(c.pid, sig);  // in case it is not (yet) a group leader
  }
}

// Whatever a child left running in its process group (`cmd &` in a rank's script) ends
// with it: SIGTERM, and SIGKILL kLeftoverGrace later, so nothing outlives the job.
void Supervisor::end_leftovers() {
  std::vector<pid_t> groups;
  for (const auto& c : children_) {
    if (c.pid > 0 && kill(-c.pid, 0) == 0) {
      spdlog::warn("{} left processes running in its process group {}; sending them SIGTERM", c.spec->name, c.pid);
      kill(-c.pid, SIGTERM);
      groups.push_back(c.pid);
    }
  }
  const auto give_up = Clock::now() + kLeftoverGrace;
  const auto any_left = [&] {
    return std::any_of(groups.begin(), groups.end(), [](pid_t g) { return kill(-g, 0) == 0; });
  };
  while (any_left() && Clock::now() < give_up) usleep(20000);
  for (const pid_t g : groups) kill(-g, SIGKILL);
}

void Supervisor::abandon_stuck() {
  for (auto& c : children_) {
    if (!c.running) continue;
    spdlog::error("{} (pid {}) survived SIGKILL for {}s; giving up on it", c.spec->name, c.pid,
                  std::chrono::duration_cast<std::chrono::seconds>(kKillWait).count());
    c.running = false;
  }
}

// The child's last output, and its tail kept for output/failure.
void Supervisor::drain(Child& c) {
  c.output.drain_and_close();
  c.status.tail = c.output.tail();
}

int Supervisor::live() const {
  return static_cast<int>(std::count_if(children_.begin(), children_.end(),
                                        [](const Child& c) { return c.running; }));
}

std::string Supervisor::live_names() const {
  std::vector<std::string> names;
  for (const auto& c : children_) {
    if (c.running) names.push_back(c.spec->name);
  }
  return joined(names, ", ");
}

// "algo-2", or "every critical child (algo-2, algo-4)".
std::string Supervisor::critical_names() const {
  std::vector<std::string> names;
  for (const auto& c : children_) {
    if (c.spec->critical) names.push_back(c.spec->name);
  }
  return names.size() == 1 ? names[0] : "every critical child (" + joined(names, ", ") + ")";
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
