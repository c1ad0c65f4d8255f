// Starting one child (spawn.h): the exec plan is built on the caller's thread, the fork
// happens on the spawner thread, and a close-on-exec pipe tells whether the exec worked.
#include "tandem/common/spawn.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace tandem {
namespace {

constexpr size_t kMaxFds = 16;  // descriptors a child may be given (SpawnSpec::fds)

// Everything the child needs, built before fork: between fork and exec only
// async-signal-safe calls are allowed (no allocation), since another thread may hold
// the allocator's lock at the moment of the fork.
struct ExecPlan {
  std::vector<std::string> env_strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<std::pair<int, int>> fds;
  cpu_set_t cpus;
  bool pin = false;
  int output_fd = -1;
  int death_signal = SIGKILL;
  std::string cwd;
};

ExecPlan make_plan(const SpawnSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) throw std::runtime_error("cannot start a process: empty command line");
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
      throw std::runtime_error("cannot start " + spec.argv[0] + ": no such cpu " + std::to_string(cpu));
    }
    CPU_SET(cpu, &plan.cpus);
    plan.pin = true;
  }
  if (spec.fds.size() > kMaxFds) throw std::runtime_error("cannot start " + spec.argv[0] + ": too many descriptors");
  plan.fds = spec.fds;
  plan.output_fd = spec.output_fd;
  plan.death_signal = spec.death_signal;
  plan.cwd = spec.cwd;
  return plan;
}

void child_write(const char* s) {
  ssize_t ignored = write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

[[noreturn]] void child_fail(const char* what, const char* arg, int err, int code, int status_fd) {
  child_write("tandem: ");
  child_write(what);
  child_write(" '");
  child_write(arg);
  child_write("': ");
  // strerrordesc_np, unlike strerror, never translates or allocates.
  const char* desc = strerrordesc_np(err);
  child_write(desc != nullptr ? desc : "unknown error");
  child_write("\n");
  ssize_t ignored = write(status_fd, &err, sizeof err);
  (void)ignored;
  _exit(code);
}

// A descriptor number above every one the child is given, so that no dup2 below
// overwrites one still to be copied.
int lift(int fd, int above) { return fd < 0 || fd > above ? fd : fcntl(fd, F_DUPFD_CLOEXEC, above + 1); }

// Runs in the forked child; never returns.
[[noreturn]] void exec_child(const ExecPlan& plan, int status_fd, pid_t parent) {
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setpgid(0, 0);  // its own group, so a stop signal also reaches whatever the child starts
  // If the parent died before prctl took effect, nobody would ever kill us.
  if (plan.death_signal != 0 && (prctl(PR_SET_PDEATHSIG, plan.death_signal) != 0 || getppid() != parent)) _exit(1);
  int highest = STDERR_FILENO;
  for (const auto& [ours, theirs] : plan.fds) highest = std::max(highest, theirs);
  status_fd = lift(status_fd, highest);
  int out_fd = lift(plan.output_fd, highest);
  int lifted[kMaxFds];
  const size_t n = std::min(plan.fds.size(), kMaxFds);
  for (size_t i = 0; i < n; ++i) lifted[i] = lift(plan.fds[i].first, highest);
  for (size_t i = 0; i < n; ++i) dup2(lifted[i], plan.fds[i].second);  // the copy is not close-on-exec
  if (out_fd >= 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
  }
  const int devnull = open("/dev/null", O_RDONLY);  // children never read the terminal
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  if (!plan.cwd.empty() && chdir(plan.cwd.c_str()) != 0) {
    child_fail("cannot enter the working directory", plan.cwd.c_str(), errno, 126, status_fd);
  }
  if (plan.pin && sched_setaffinity(0, sizeof plan.cpus, &plan.cpus) != 0) {
    child_fail("cannot pin to the requested cpus for", plan.argv[0], errno, 126, status_fd);
  }
  execvpe(plan.argv[0], plan.argv.data(), plan.envp.data());
  child_fail("cannot execute", plan.argv[0], errno, 127, status_fd);
}

Spawned fork_and_exec(const ExecPlan& plan) {
  int status[2];
  if (pipe2(status, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) exec_child(plan, status[1], parent);
  const int fork_errno = errno;
  close(status[1]);
  if (pid < 0) {
    close(status[0]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  }
  setpgid(pid, pid);  // also here, so signalling the group cannot race the child's own call
  Spawned out{pid, 0};
  ssize_t n;
  do {
    n = read(status[0], &out.exec_errno, sizeof out.exec_errno);  // EOF: the exec closed it
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof out.exec_errno)) out.exec_errno = 0;
  close(status[0]);
  return out;
}

// One fork asked of the spawner thread.
struct SpawnJob {
  const ExecPlan* plan = nullptr;
  Spawned result;
  std::string error;
  bool done = false;  // GUARDED_BY(Spawner::mu_)
};

// The thread every fork happens on: started at the first spawn with every signal
// blocked (no handler of this process ever runs there, nor in a child before its exec),
// and never ended.
class Spawner {
 public:
  static Spawner& get() {
    static Spawner* spawner = new Spawner();  // never destroyed: its thread outlives main's return
    return *spawner;
  }

  Spawned run(const ExecPlan& plan) {
    SpawnJob job;
    job.plan = &plan;
    std::unique_lock lock(mu_);
    queue_.push_back(&job);
    wake_.notify_all();
    done_.wait(lock, [&] { return job.done; });
    if (!job.error.empty()) throw std::runtime_error(job.error);
    return job.result;
  }

 private:
  Spawner() {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    std::thread([this] { loop(); }).detach();
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  [[noreturn]] void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return !queue_.empty(); });
      SpawnJob* job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      try {
        job->result = fork_and_exec(*job->plan);
      } catch (const std::exception& e) {
        job->error = e.what();
      }
      lock.lock();
      job->done = true;
      done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::deque<SpawnJob*> queue_;  // GUARDED_BY(mu_)
};

}  // namespace

Spawned spawn_process(const SpawnSpec& spec) { return Spawner::get().run(make_plan(spec)); }

}  // namespace tandem
