// Running one host's role. Each returns the process exit code: 0 ok, 1 failed,
// 2 interrupted (SIGTERM/SIGINT before training finished).
#pragma once

#include "tandem/common/exit_codes.h"

#include <functional>
#include <string>
#include <vector>

#include "tandem/cluster/cluster.h"
#include "tandem/launch/settings.h"

namespace tandem::launch {


// Serves batches on settings.worker.port (or cluster.worker_port) until a trainer
// says Shutdown (exit 0), SIGTERM (exit 0), or no trainer speaks for --idle-timeout or
// claims it within --claim-timeout (exit 5, with the reason in output/failure).
// `job_data`: a pool's (--pool-jobs) data options of a job whose settings are its own
// (PoolJob::settings over settings.data; the command line's parser, cli/pool_data.h).
using JobData = std::function<DataOptions(const std::string& settings)>;
int run_worker(const Settings& settings, const std::string& host, const JobData& job_data = {});

// A data worker host of a launched job: run_worker, and when it cannot start for a
// reason of the job's configuration (ConfigError: its port taken, its --data missing) it
// tells the first trainer host's job channel (release_gate.h) at `trainer_address`,
// within kTellTrainersS, so the job ends at once with its reason (exit 3) instead of
// the trainers waiting for it. Rethrows.
inline constexpr double kTellTrainersS = 30;
int run_worker_host(const Settings& settings, const std::string& host, const std::string& trainer_address);

// Trains on batches from `worker_targets` ("address:port") plus local preprocessing.
// When training ends (or fails) every worker is told to shut down. Writes the summary
// JSON; on failure writes output/failure.
// `cluster`: what `launch` discovered, for the summary's instance types; null = discover it
// here (once, at the end), as a rank started in a process of its own does.
int run_trainer(const Settings& settings, const std::vector<std::string>& worker_targets,
                const std::string& host, const cluster::Cluster* cluster = nullptr);

// `tandem launch` / `tandem train`: discovers the cluster, resolves this host's role
// and runs it. On a trainer host with a command (settings.launch: `-- COMMAND`, --script)
// it starts one process of the command per GPU (--procs-per-host) with the environment
// of include/tandem/common/launch_env.h, `given` (the settings given, a JSON object) as
// TANDEM_SETTINGS, and supervises them (rank_group.h). Without one, a trainer host
// with several processes (--procs-per-host, GPUs) or in a multi-host trainer group starts
// one `tandem trainer` per process with torchrun's variables and `forwarded` (this
// command's own flags) and supervises them.
int run_launch(const Settings& settings, const std::vector<std::string>& forwarded = {},
               const std::string& given = "{}");

// This host's name in logs and summaries: --current-host, else the system's host name,
// else `fallback`.
std::string host_name(const ClusterOptions& opts, const std::string& fallback);

}  // namespace tandem::launch
