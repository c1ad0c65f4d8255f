// The environment of the ranks `tandem launch` starts on a trainer host: torchrun's
// variables and tandem's own, by the names of include/tandem/common/launch_env.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tandem/common/rank_place.h"

namespace tandem::launch {

// What every rank of one host is told besides its place.
struct RankContext {
  std::string master_addr;           // the first trainer host's address
  int master_port = 29500;           // the same on every host (--master-port)
  std::vector<std::string> workers;  // the data workers, "address:port"
  std::string token;                 // "" = none: TANDEM_TOKEN is then not set
  std::string job;                   // the job name workers check
  std::string settings_json = "{}";  // TANDEM_SETTINGS
  std::string sagemaker_root;        // this host's root
  std::string host;                  // this host's name
  std::string host_types;            // TANDEM_HOST_TYPES: cluster::host_types(); "" = not set
  std::string gloo_address;          // TANDEM_GLOO_ADDRESS (tandem's trainer ranks); "" = not set
  std::string stream_relay;          // TANDEM_STREAM_RELAY: the host's stream relay; "" = none
  // OMP_NUM_THREADS for each rank, 0 = not set (the launcher's environment has one).
  int omp_threads = 0;
  // GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME; "" = not set (unknown, or the launcher's
  // environment has them).
  std::string network_interface;
  // USE_LIBUV=0 for the ranks (when the launcher's environment does not set it): Debian's
  // PyTorch 2.x is built without libuv, and its TCPStore (init_process_group's env://
  // rendezvous) refuses the libuv default there; the other backend works everywhere.
  bool libuv_off = false;
};

// The variables to add to a rank's environment (launch_env.h's table).
std::map<std::string, std::string> rank_environment(const RankContext& context, const RankPlace& place);

// OMP_NUM_THREADS for `local_world` ranks sharing `cores`: cores / local_world, at least
// 1; 0 when `already_set` (the user's value stays).
int omp_threads_per_rank(unsigned cores, int local_world, bool already_set);

}  // namespace tandem::launch
