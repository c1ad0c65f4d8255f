// The launcher's own settings: a user's program run as the ranks (LaunchOptions) and a
// whole cluster as local processes (SimulateOptions). See docs/configuration.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// A whole heterogeneous cluster as local processes.
struct SimulateOptions {
  int trainer_hosts = 1;                           // --trainer-hosts
  int worker_hosts = 2;                            // --worker-hosts
  std::string trainer_instance_type = "ml.p4d.24xlarge";
  std::string worker_instance_type = "ml.c5.18xlarge";
  int cpus_per_host = 0;                           // --cpus-per-host: pin each host; 0 = no pinning
  std::string run_dir;                             // --run-dir: default a fresh /tmp/tandem-sim-*
  bool keep = false;                               // --keep: keep models and checkpoints of a fresh run dir
  double timeout_s = 1800;                         // --timeout: stop the cluster after this long
  // --every-host: every host runs the command itself (as SageMaker's training toolkit runs
  // the entry point on every host: one script that calls tandem.serve()), not `tandem
  // launch`; the settings reach it as tandem- keys of hyperparameters.json.
  bool every_host = false;
  // --job FILE: a SageMaker job's estimator arguments (launch/sagemaker_job.h): its groups,
  // hyperparameters, distribution, channels and checkpoints, run as the toolkit runs them.
  std::string job_file;
};

// A user's program run as the ranks of each trainer host (`tandem launch -- COMMAND`,
// docs/python.md). Neither command nor script set: the ranks are tandem's own trainer.
struct LaunchOptions {
  // `-- COMMAND ARGS...` after the flags, or `command` in a settings file (a list).
  std::vector<std::string> command;
  // --script FILE (SageMaker's hyperparameters): the command is the Python interpreter
  // (--python, else /usr/bin/python3, else python3 on PATH), FILE and --script-args.
  std::string script;
  std::vector<std::string> script_args;  // --script-args ARG (repeatable; a list in a file)
  // --role-only (tandem.serve()): print this host's role as one JSON line and exit 0.
  bool role_only = false;
  // --stop-grace: seconds the ranks get between SIGTERM and SIGKILL when the job stops;
  // -1 = 110 on SageMaker (which kills the container 120 s after its SIGTERM), else 30.
  double stop_grace_s = -1;
  // --release-port: where the first trainer host hears that another's ranks have ended
  // (launch/release_gate.h); 0 = --master-port + 1.
  int release_port = 0;
  // --release-wait: how long the first trainer host waits, once its own ranks have ended,
  // for the other trainer hosts' ranks before it releases the workers anyway.
  double release_wait_s = 300;
  // --share-streams: a trainer host's ranks share one batch stream to each data worker
  // through a relay (transport/stream_relay.h): "on", "off", or "auto" (on when the job
  // has more ranks than kShareStreamsAbove, where a worker would serve one stream per
  // rank; off below, where a direct stream costs the host no copy).
  std::string share_streams = "auto";
};
inline constexpr int kShareStreamsAbove = 64;

}  // namespace tandem
