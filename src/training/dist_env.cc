#include "tandem/training/trainer.h"

namespace tandem::training {

DistInfo dist_info(const LauncherEnv& env, const TrainerOptions& opts) {
  DistInfo d;
  static_cast<RankPlace&>(d) = env.place;
  d.master_port = env.master_port > 0 ? env.master_port : opts.master_port;
  if (!env.master_addr.empty()) d.master_addr = env.master_addr;
  d.gloo_address = env.gloo_address;
  d.agent_store = env.agent_store;
  d.restart_count = env.restart_count;
  d.timeout_s = opts.dist_timeout_s;
  d.single_rank_group = opts.single_rank_group;
  return d;
}

}  // namespace tandem::training
