// Process supervision: start children, stream their output with a per-child prefix,
// and wait for them under a deadline. Used by `simulate` (one child per host) and by
// `launch` on trainer hosts (one child per GPU).
#pragma once

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace tandem::launch {

struct ProcessSpec {
  std::string name;                         // log prefix, e.g. "algo-1"
  std::vector<std::string> argv;            // argv[0] is the executable path
  std::map<std::string, std::string> env;   // added to (overriding) the parent's environment
  std::vector<int> cpus;                    // pin to these cores; empty = no pinning
  // A critical child that exits non-zero (or by a signal) makes the supervisor stop all
  // the others: SIGTERM, then SIGKILL after SuperviseOptions::grace_s.
  bool critical = true;
  std::string cwd;  // its working directory; "" = this process's
};

struct ExitStatus;

struct SuperviseOptions {
  double timeout_s = 3600;  // stop everything (SIGTERM, then SIGKILL) after this long
  double grace_s = 10;      // between SIGTERM and SIGKILL
  // Once every critical child has exited ok, the non-critical ones still running get
  // this many seconds to exit on their own, then SIGTERM (then SIGKILL after grace_s);
  // negative = wait for them indefinitely (up to timeout_s). Has no effect when no child
  // is critical. A child stopped this way that exits 0 on SIGTERM is ok; one the signal
  // kills is reported "killed by SIGTERM".
  double linger_s = -1;
  // When every non-critical child has exited with a failure while a critical one still
  // runs, stop the rest (SIGTERM, then SIGKILL after grace_s). `simulate` sets it: its
  // trainers have no data left to train on once every worker host is gone, and a worker
  // that exits on its own is never coming back there. Has no effect when every child is
  // critical.
  bool stop_when_helpers_fail = false;
  // Each child's last this many lines of output are kept in ExitStatus::tail (for
  // output/failure); 0 = none.
  int tail_lines = 0;
  // Set to true when SIGINT or SIGTERM reached this process (the run was stopped from
  // outside, not by a child's failure); nullptr = not asked.
  bool* signalled = nullptr;
  // Polled every round (100 ms) while nothing is stopping: a non-empty answer stops every
  // child (SIGTERM, then SIGKILL after grace_s), logged as the reason. `launch` stops a
  // host's ranks this way when another trainer host has failed.
  std::function<std::string()> stop_when;
  // Called once, as it happens, when a critical child's failure is about to stop the
  // others (with that child's status and its tail so far): a host tells the job at once.
  std::function<void(const ExitStatus&)> on_failure;
  // Where the "[name] line" output goes; nullptr = std::cout. A test knob: tests point
  // it at a std::ostringstream to check what the children printed.
  std::ostream* out = nullptr;
};

struct ExitStatus {
  std::string name;
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the signal that ended it, 0 if it exited
  int pid = 0;         // the child's process id (for logs, and for tests to check it is gone)
  // A critical child whose failure stopped the others (the cause, not a casualty).
  bool stopped_others = false;
  std::vector<std::string> tail;  // its last SuperviseOptions::tail_lines lines, oldest first
  bool ok() const { return signal == 0 && exit_code == 0; }
  // "exited 0", "exited 3", "killed by SIGKILL"; "did not exit" for a child that
  // outlived even SIGKILL (stuck in the kernel) and was abandoned.
  std::string describe() const;
};

// Starts every child, copies each line of their stdout and stderr to this process's
// stdout as "[name] line", and returns when all have exited. SIGINT or SIGTERM received
// by this process is forwarded as SIGTERM to all children (then SIGKILL after grace).
// Children die with this process (PR_SET_PDEATHSIG), so none is ever left behind.
// Each child leads its own process group, and stop signals go to the whole group, so
// a child's own children (e.g. under `sh -c`) are stopped too. A second SIGINT/SIGTERM
// while stopping sends SIGKILL at once. Not reentrant: one supervise() per process at a
// time. A child that cannot be executed (no such file) exits 127 with a message on its
// output. Throws std::runtime_error if a child cannot be started at all (bad spec, fork
// failure); the children already started are killed first.
std::vector<ExitStatus> supervise(const std::vector<ProcessSpec>& children,
                                  const SuperviseOptions& opts);

}  // namespace tandem::launch
