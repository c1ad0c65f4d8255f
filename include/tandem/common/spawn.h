// Starting a child process: the one way tandem starts every child (a host's ranks and
// simulate's hosts through launch::supervise, the Python processes of a dataset's pool).
//
// Each child leads its own process group (stop signals go to the group, so what it starts
// is stopped too) and dies with this process: PR_SET_PDEATHSIG. That signal fires when the
// *thread* that forked the child exits, not the process, so every fork happens on one
// thread of this process that lives as long as it does (started at the first spawn), never
// on a caller's thread, which may be a short-lived one of a thread pool.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tandem {

struct SpawnSpec {
  std::vector<std::string> argv;           // argv[0]: a path, or a name looked up on PATH
  std::map<std::string, std::string> env;  // added to (overriding) this process's environment
  std::vector<int> cpus;                   // pin to these cores; empty = no pinning
  // Descriptors the child gets: {ours, the child's number}. Ours stay open here.
  std::vector<std::pair<int, int>> fds;
  int output_fd = -1;         // the child's stdout and stderr; -1 = this process's
  int death_signal = SIGKILL;  // sent to the child when this process dies
  std::string cwd;             // the child's working directory; "" = this process's
};

struct Spawned {
  pid_t pid = -1;
  // The errno of a failed exec (no such file, not executable), 0 when the program runs.
  // Such a child has said why on its stderr and exited 127; the caller still reaps it.
  int exec_errno = 0;
};

// Forks and execs `spec`, stdin on /dev/null, signal dispositions and mask at their
// defaults. Returns once the exec has succeeded or failed. Throws std::runtime_error for a
// bad spec (empty argv, a cpu that does not exist) or a failed fork.
Spawned spawn_process(const SpawnSpec& spec);

}  // namespace tandem
