// A trainer host's ranks as one component, as torchrun's elastic agent runs its workers:
// one spec (the program, tandem's own trainer or the user's command, and what every rank
// is told, rank_env.h), one supervise call (process.h), one exit-code rule
// (job_exit_code), one writer of output/failure, and the end-of-job barrier
// (release_gate.h) before the first trainer host releases the data workers. `launch`
// builds the spec; `simulate` runs `launch` on each host and ends with the same rule.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tandem/launch/options.h"
#include "tandem/launch/process.h"
#include "tandem/launch/rank_env.h"
#include "tandem/transport/options.h"

namespace tandem::launch {

struct RankGroupOptions {
  // The program each rank runs: the user's command (argv[0] as find_command() returned
  // it) or tandem's own trainer (`tandem trainer` and the settings given).
  std::vector<std::string> argv;
  std::string shown;              // how logs and output/failure name it; "" = argv itself
  RankContext context;            // what every rank is told
  int group_rank = 0;             // this host among the trainer hosts
  int groups = 1;                 // trainer hosts
  int procs = 1;                  // ranks on this host
  double grace_s = 30;            // SIGTERM -> SIGKILL, on a stop
  std::string failure_root;       // <root>/output/failure says why the host failed; "" = nowhere
  // The data workers this host releases (Shutdown) once every rank of every trainer host
  // has ended: the first trainer host's job; empty = none.
  std::vector<std::string> release;
  SecurityOptions security;       // the token and job name of the release calls and reports
  // Every trainer host's ranks end before the workers go (release_gate.h): the first host
  // (`release` given) hears from `peers`, the other trainer hosts, on `release_port` and
  // waits for them up to release_wait_s after its own ranks ended; another host with
  // workers to think of tells `report_to` (MASTER_ADDR) when its ranks have ended.
  std::vector<std::string> peers;
  // The first host also hears from the data worker hosts: one that cannot start (its
  // port taken, its data missing: exit 3) ends the job at once with its reason.
  std::vector<std::string> worker_hosts;
  std::string report_to;          // "" = report to nobody (the first host, or no workers)
  int release_port = 0;
  std::string release_bind = "0.0.0.0";  // where the first host listens: --bind, as its workers do
  double release_wait_s = 300;
  // The ranks share one batch stream to each data worker through a relay this process
  // runs (--share-streams; transport/stream_relay.h), in a directory of its own.
  bool share_streams = false;
  int tail_lines = 20;            // the failing rank's last lines in output/failure
  std::ostream* out = nullptr;    // test knob: where the ranks' "[rank-N] line"s go (nullptr = stdout)
};

// Starts the ranks and waits for all of them. The first trainer host then waits for the
// other hosts' reports (at once when a rank failed) and releases the workers; another
// reports its end. Returns the host's exit code (job_exit_code); on the first host, when
// its ranks exited 0, that of the first other host that reported a failure (output/failure
// names it). SIGINT/SIGTERM to this process reach every rank as SIGTERM, and end the
// wait for the other hosts at once. Throws ConfigError when the release port is taken.
int run_rank_group(const RankGroupOptions& opts);

// The GPUs a host's ranks can use: `torch_count` (LibTorch's, which honours
// CUDA_VISIBLE_DEVICES) when it sees any; else, since the ranks' own torch may have CUDA
// where this tandem's LibTorch has not, NVIDIA's device files (`device_files`), as many
// as `cuda_visible_devices` (the variable's value, when set) lets through: "" or "-1" none.
int visible_gpus(int torch_count, int device_files, const std::optional<std::string>& cuda_visible_devices);

// visible_gpus() of this host: LibTorch's count, /dev/nvidiaN, CUDA_VISIBLE_DEVICES.
int host_gpus();

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
