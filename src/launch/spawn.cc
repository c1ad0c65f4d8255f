// Starting one supervised child (spawn.h).
#include "spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>

extern char** environ;

namespace tandem::launch {
namespace {

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

}  // namespace

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

}  // namespace tandem::launch
