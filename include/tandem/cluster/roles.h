// Role resolution: which hosts train, which serve data, and where this host fits; and
// the JSON `tandem inspect` prints about it. Reaching hosts is in cluster/endpoint.h.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tandem/cluster/cluster.h"
#include "tandem/cluster/options.h"

namespace tandem::cluster {

enum class Role { kTrainer, kWorker };

// "trainer" or "worker", as logs and `tandem inspect` name a role.
const char* role_name(Role role);

// True for the GPU instance families (ml.p*, ml.g*: ml.p4d.24xlarge, ml.g5.xlarge), false
// for CPU ones (ml.c5, ml.m5, ml.r5, ...). The "ml." prefix is optional.
bool is_gpu_instance_type(const std::string& instance_type);

// True for names shaped like a cloud instance type (ml.c5.18xlarge, p4d.24xlarge); false
// for a Slurm partition ("debug", "gpu") or "unknown", which say nothing about GPUs.
bool is_instance_type(const std::string& instance_type);

struct RolePlan {
  Role role = Role::kTrainer;
  std::vector<std::string> trainer_groups;  // sorted
  std::vector<std::string> worker_groups;   // sorted
  std::vector<std::string> trainer_hosts;   // hosts of all trainer groups, sorted
  std::vector<std::string> worker_hosts;    // hosts of all worker groups, sorted
  int host_index = 0;  // this host's position in trainer_hosts or worker_hosts
  // True when no group serves data: every host trains on its own cores.
  bool homogeneous = false;
  // Why each decision was made, keyed "role", "trainer_groups", "worker_groups".
  std::map<std::string, std::string> origin;
};

// By default a group whose hosts have GPUs (when the source says: Slurm) or, when that is
// unknown, whose instance type is a GPU family (ml.p*, ml.g*) trains and the rest serve data;
// groups with neither are settled by elimination (one trainer found: they serve; all others
// serve: the lone one trains); a single-group cluster trains everywhere. --trainer-group and
// --worker-group override. Throws ConfigError on anything ambiguous or inconsistent.
RolePlan resolve_roles(const Cluster& cluster, const ClusterOptions& opts);

// The JSON that `tandem inspect` prints: the cluster, this host's role, its trainer rank
// range or worker address, and where each value came from.
// `named_workers` (--workers, with ports) and `worker_service` replace the worker groups'
// hosts in a trainer's list, as they do when it runs.
nlohmann::json describe(const Cluster& cluster, const RolePlan& plan, const ClusterOptions& opts,
                        int procs_per_host, const std::vector<std::string>& named_workers = {},
                        const std::string& worker_service = "");

}  // namespace tandem::cluster
