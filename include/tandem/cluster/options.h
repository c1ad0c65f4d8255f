// The cluster's settings (ClusterOptions: where this host sits, how to reach the others)
// and what the launcher that started this process said (LauncherEnv). Filled by the
// command line (launch/settings.h); see docs/configuration.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/common/rank_place.h"

namespace tandem {

// Where this host sits in the job and how to reach the others.
struct ClusterOptions {
  std::string sagemaker_root = "/opt/ml";    // --sagemaker-root, env TANDEM_SAGEMAKER_ROOT
  std::string config_file;                   // --config FILE.json
  std::vector<std::string> trainer_groups;   // --trainer-group NAME (repeatable)
  std::vector<std::string> worker_groups;    // --worker-group NAME (repeatable)
  std::string current_host;                  // --current-host: overrides discovery
  // --host-map name=addr[:port],... (env TANDEM_HOST_MAP): how to reach a host by name.
  // `simulate` uses it to put every host on 127.0.0.1 with its own ports.
  std::vector<std::string> host_map;
  int worker_port = 6000;                    // --worker-port: where data workers listen
  // Whether --worker-port and --master-port were given (a flag, a settings file): on
  // Slurm the ports not given come from the job's id (cluster::slurm_job_ports).
  bool worker_port_given = false;
  bool master_port_given = false;
  // --metrics-port: a data worker, and a trainer's rank 0, serve Prometheus text at
  // /metrics (-1 = none; 0 = a free port, logged): rates, data wait, tandem_workers_wanted.
  int metrics_port = -1;
  // --metrics-bind: the address it listens on; "" = a worker's --bind, a trainer's 0.0.0.0.
  std::string metrics_bind;
  double resolve_timeout_s = 120;            // --resolve-timeout: DNS may lag at job start
};

// What the launcher that started this process said through its environment, read once
// at start (cluster::read_launcher_env) so no other code reads the environment.
struct LauncherEnv {
  // torchrun's contract for one rank (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), set
  // by torchrun, Kubeflow's PyTorchJob, or `tandem launch` for the ranks it starts. None
  // set: a world of one.
  RankPlace place;
  std::string master_addr;   // MASTER_ADDR; empty = 127.0.0.1
  int master_port = 0;       // MASTER_PORT; 0 = --master-port
  // TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent serves the rendezvous store, under
  // the prefix of attempt TORCHELASTIC_RESTART_COUNT.
  bool agent_store = false;
  int restart_count = 0;
  // Set by `tandem launch` for its ranks: the address Gloo binds to (TANDEM_GLOO_ADDRESS),
  // and by `tandem simulate` for its hosts (TANDEM_SIMULATED_HOST: instance types are
  // labels there, every host shares one machine).
  std::string gloo_address;
  bool simulated_host = false;
  // TANDEM_RANK_GROUP=1: tandem's rank group (launch/rank_group.h) started this rank; it
  // releases the data workers and writes output/failure once every rank has ended, so
  // the rank leaves both to it.
  bool rank_group = false;
  // Set by tandem's rank group too: this host's name (TANDEM_HOST) and every host's
  // instance type, "host=type,..." (TANDEM_HOST_TYPES), so that a rank's summary needs no
  // discovery of its own (cluster::cluster_for_plan).
  std::string host;
  std::string host_types;
  // Set by `tandem launch` for its ranks when they share their streams to each data
  // worker (--share-streams): the host's stream relay, "unix:PATH"
  // (TANDEM_STREAM_RELAY; transport/stream_relay.h).
  std::string stream_relay;
};

}  // namespace tandem
