// Where a tandem.Feed given no workers, rank or world finds them: the environment `tandem
// launch` gives each rank (include/tandem/common/launch_env.h: TANDEM_WORKERS,
// TANDEM_SETTINGS, TANDEM_JOB_NAME, torchrun's RANK and WORLD_SIZE), else the cluster
// tandem's own discovery finds (cluster::discover: SageMaker's resourceconfig.json under
// sagemaker_root, ...), whose worker groups a trainer host dials as `tandem launch` does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "feed_settings.h"
#include "tandem/cluster/cluster.h"
#include "tandem/launch/settings.h"

namespace tandem::python {

// `given` (the keyword arguments) after the launcher's settings: TANDEM_SETTINGS' feed
// settings (keyword arguments win; the trainer's others, like lr or model, are left out)
// and job_name from TANDEM_JOB_NAME. Throws ConfigError when TANDEM_SETTINGS is not a
// JSON object of strings (or lists of strings).
std::vector<Setting> with_launcher_settings(std::vector<Setting> given);

struct FeedPlace {
  std::vector<std::string> workers;  // "address:port"
  int rank = 0;
  int world = 1;
  int local_world = 1;          // ranks on this host (LOCAL_WORLD_SIZE)
  bool launched = false;        // started by `tandem launch` (TANDEM_WORKERS is set)
  bool simulated = false;       // a host of `tandem simulate`
  std::string relay;            // the host's stream relay (TANDEM_STREAM_RELAY); "" = none
  std::string launch;           // the launch of this host's ranks (TANDEM_LAUNCH_ID); "" = the parent process
  cluster::Cluster cluster;     // for the plan's instance types; empty when not discovered
  std::string workers_from;     // where the workers came from, for the log
};

// The feed's workers, rank and world: the arguments when given, else (workers)
// TANDEM_WORKERS, else the worker groups of the discovered cluster when this host trains;
// (rank, world) RANK and WORLD_SIZE, else this host's place among the cluster's trainer
// hosts. Throws ConfigError naming what was looked at when there are no workers and
// `need_workers` (a feed without local threads), or when this host is one of the
// cluster's data workers.
FeedPlace feed_place(const std::optional<std::vector<std::string>>& workers, std::optional<int> rank,
                     std::optional<int> world, const Settings& settings, bool need_workers);

}  // namespace tandem::python
