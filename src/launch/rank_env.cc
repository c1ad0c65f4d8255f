#include "tandem/launch/rank_env.h"

#include <algorithm>

#include "tandem/common/launch_env.h"
#include "tandem/common/text.h"

namespace tandem::launch {

std::map<std::string, std::string> rank_environment(const RankContext& c, const RankPlace& p) {
  namespace v = launch_env;
  std::map<std::string, std::string> env = {
      {v::kRank, std::to_string(p.rank)},
      {v::kLocalRank, std::to_string(p.local_rank)},
      {v::kWorldSize, std::to_string(p.world)},
      {v::kLocalWorldSize, std::to_string(p.local_world)},
      {v::kGroupRank, std::to_string(p.host())},
      {v::kGroupWorldSize, std::to_string(p.hosts())},
      {v::kRoleRank, std::to_string(p.rank)},
      {v::kRoleWorldSize, std::to_string(p.world)},
      {v::kMasterAddr, c.master_addr},
      {v::kMasterPort, std::to_string(c.master_port)},
      {v::kWorkers, joined(c.workers)},
      {v::kJobName, c.job},
      {v::kSettings, c.settings_json},
      {v::kSageMakerRoot, c.sagemaker_root},
      {v::kHost, c.host},
      {v::kRankGroup, "1"},
  };
  // The token reaches the ranks through the environment, never their command lines.
  if (!c.token.empty()) env[v::kToken] = c.token;
  if (!c.gloo_address.empty()) env[v::kGlooAddress] = c.gloo_address;
  if (!c.stream_relay.empty()) env[v::kStreamRelay] = c.stream_relay;
  if (!c.host_types.empty()) env[v::kHostTypes] = c.host_types;
  if (c.omp_threads > 0) env[v::kOmpThreads] = std::to_string(c.omp_threads);
  if (c.libuv_off) env[v::kUseLibuv] = "0";
  if (!c.network_interface.empty()) {
    env[v::kGlooInterface] = c.network_interface;
    env[v::kNcclInterface] = c.network_interface;
  }
  return env;
}

int omp_threads_per_rank(unsigned cores, int local_world, bool already_set) {
  if (already_set) return 0;
  return std::max(1, static_cast<int>(cores) / std::max(1, local_world));
}

}  // namespace tandem::launch
