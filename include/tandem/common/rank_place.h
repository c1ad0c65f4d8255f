// Where one data-parallel rank sits, in torchrun's words (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE): one struct for what a launcher said (LauncherEnv), the ranks tandem
// starts on a trainer host (launch/rank_env.h) and the trainer's process group
// (training::DistInfo).
#pragma once

namespace tandem {

struct RankPlace {
  int rank = 0;         // RANK: 0 .. world-1
  int world = 1;        // WORLD_SIZE
  int local_rank = 0;   // LOCAL_RANK: 0 .. local_world-1 on this host (the GPU to use)
  int local_world = 1;  // LOCAL_WORLD_SIZE: ranks on this host

  // Rank `local_rank` of host `host` (of `hosts`), each host running `local_world` ranks.
  static RankPlace on_host(int host, int hosts, int local_rank, int local_world) {
    return {host * local_world + local_rank, hosts * local_world, local_rank, local_world};
  }
  // GROUP_RANK and GROUP_WORLD_SIZE: this rank's host among hosts of local_world ranks each.
  int host() const { return rank / local_world; }
  int hosts() const { return world / local_world; }
};

}  // namespace tandem
