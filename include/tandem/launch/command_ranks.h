// A user's program as the ranks of one trainer host (`tandem launch -- COMMAND`): one
// process per GPU (or --procs-per-host) with torchrun's variables and tandem's own
// (rank_env.h), supervised as torchrun does: one failing ends the others and the host,
// with its exit code and its last lines in output/failure.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/launch/process.h"
#include "tandem/launch/rank_env.h"

namespace tandem::launch {

struct CommandRanksOptions {
  std::vector<std::string> argv;  // the command; argv[0] as find_command() returned it
  RankContext context;            // what every rank is told
  int group_rank = 0;             // this host among the trainer hosts
  int groups = 1;                 // trainer hosts
  int procs = 1;                  // ranks on this host
  double grace_s = 30;            // SIGTERM -> SIGKILL, on a stop
  std::string failure_root;       // <root>/output/failure says why the host failed; "" = nowhere
  // The data workers this host releases (Shutdown) once every rank has ended: the
  // first trainer host's job; empty = none.
  std::vector<std::string> release;
  SecurityOptions security;       // the token and job name of the release calls
  int tail_lines = 20;            // the failing rank's last lines in output/failure
  std::ostream* out = nullptr;    // test knob: where the ranks' "[rank-N] line"s go (nullptr = stdout)
};

// Starts the ranks, waits for all of them, releases the workers, and returns the host's
// exit code (job_exit_code). SIGINT/SIGTERM to this process reach every rank as SIGTERM.
int run_command_ranks(const CommandRanksOptions& opts);

// The command of the ranks: opts.command, else [python, opts.script, script_args...];
// empty when neither is set (tandem's own trainer). `python` is the interpreter for a
// script. Throws ConfigError when both are set or --script-args comes without --script.
std::vector<std::string> rank_command(const LaunchOptions& opts, const std::string& python);

// What exec would run for `name`: a name with a '/' as it is, else the first match on
// `path` (PATH's value). Throws ConfigError naming the command and the fix when there is
// none, it is a directory, or it is not executable.
std::string find_command(const std::string& name, const std::string& path);

// The host's exit code from its ranks': 0 when all exited 0; else that of the rank whose
// failure stopped the others, or (a stop from outside) of the first rank that did not
// exit 0; a rank killed by a signal counts as 128 + the signal, as a shell says.
int job_exit_code(const std::vector<ExitStatus>& ranks);

// output/failure's text for a failed host: which rank ended it and how, the command, and
// that rank's last lines. "" when job_exit_code is 0.
std::string failure_report(const std::vector<ExitStatus>& ranks, const std::vector<std::string>& argv);

}  // namespace tandem::launch
