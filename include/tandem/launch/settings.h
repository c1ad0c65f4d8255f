// The whole program's settings: each component's options, filled once, from defaults,
// then a --config JSON file, then SageMaker's hyperparameters.json, then flags (each
// later source wins), and the launcher's environment, read once (cli/options.h
// finish_settings). Only the command line and the launcher hold all of it; each
// component takes its own struct, from the header beside it.
#pragma once

#include "tandem/cluster/options.h"
#include "tandem/data/core/options.h"
#include "tandem/launch/options.h"
#include "tandem/training/options.h"
#include "tandem/transport/options.h"

namespace tandem {

namespace cluster {
struct Cluster;
}

struct Settings {
  ClusterOptions cluster;
  SecurityOptions security;
  DataOptions data;
  WorkerOptions worker;
  TrainerOptions trainer;
  SimulateOptions simulate;
  LaunchOptions launch;
  LauncherEnv launcher;
  // --quiet, or TANDEM_QUIET=1 from the tandem that started this process: warnings and
  // errors only, and no status line.
  bool quiet = false;
};

// `s` with the job's ports (cluster::slurm_job_ports) in place of those not given
// (worker_port_given, master_port_given); `s` as it is outside Slurm.
Settings with_job_ports(Settings s, const cluster::Cluster& c);

}  // namespace tandem
