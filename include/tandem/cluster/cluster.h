// Cluster discovery: from the SageMaker environment (or torchrun's, or nothing) to one
// plain description of the job's hosts and instance groups.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tandem/cluster/options.h"
#include "tandem/common/environment.h"

namespace tandem::cluster {

struct InstanceGroup {
  std::string name;
  std::string instance_type;
  std::vector<std::string> hosts;  // sorted
  // GPUs each host has, when the source says (Slurm's GRES); -1 = unknown, and the
  // instance type's family decides whether the group trains.
  int gpus_per_host = -1;
};

// Which platform described the cluster (discover()'s sources, in order).
enum class Platform { kLocal, kSageMaker, kTorchrun, kSlurm, kJobSet };

struct Cluster {
  Platform platform = Platform::kLocal;
  std::string current_host;
  std::string current_group;
  std::string current_instance_type;
  std::vector<std::string> hosts;     // every host of the job, sorted
  std::vector<InstanceGroup> groups;  // sorted by name
  std::string network_interface;      // may be empty
  std::string source;                 // where the description came from, e.g. the file's path
  // Where each value came from, keyed by field name ("current_host", "groups", ...):
  // a file path, an environment variable name, a flag, or "default".
  std::map<std::string, std::string> origin;
  // Other values the source gave that a user may want to see (`tandem inspect`), e.g.
  // torchrun's MASTER_ADDR or a JobSet's name, keyed by variable name.
  std::map<std::string, std::string> details;
  // The process is already one rank of a job whose launcher (torchrun, a Kubeflow
  // PyTorchJob) started one process per rank: `launch` trains as that rank, with the
  // launcher's MASTER_ADDR, and starts no rank processes of its own.
  bool ranks_started = false;
};

// The process environment's reader (common/environment.h), injectable so tests need not
// touch the process env.
using tandem::EnvLookup;
using tandem::process_env;

// Reads torchrun's rank variables (WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*) and tandem's own launcher variables, by the
// rules discover() uses. Throws ConfigError naming the variable for values that are not
// integers or do not fit together (RANK outside WORLD_SIZE, ...).
LauncherEnv read_launcher_env(const EnvLookup& env = process_env);

// Parses the text of a resourceconfig.json. `path` is only used in error messages.
// Throws ConfigError naming the file, the field and the fix.
Cluster parse_resource_config(const std::string& json_text, const std::string& path);

// Discovers the cluster, in order of precedence (docs/platforms.md):
//  1. <root>/input/config/resourceconfig.json (SageMaker);
//  2. SageMaker toolkit variables (SM_CURRENT_HOST, SM_HOSTS, SM_INSTANCE_GROUPS_DICT, ...);
//  3. torchrun / Kubeflow PyTorchJob variables (WORLD_SIZE with RANK or GROUP_RANK,
//     LOCAL_WORLD_SIZE, MASTER_ADDR): the process is already a rank;
//  4. Slurm (SLURM_JOB_ID with SLURM_JOB_NODELIST; heterogeneous jobs by SLURM_HET_SIZE
//     and SLURM_JOB_NODELIST_HET_GROUP_<n>, or the older PACK names);
//  5. a Kubernetes JobSet pod (TANDEM_JOBSET_GROUPS with the JobSet's labels, passed in
//     by the manifest through the downward API);
//  6. a single local host.
// Flags (opts.current_host) override what was discovered.
Cluster discover(const ClusterOptions& opts, const EnvLookup& env = process_env);

// Every host's instance type as the ranks of tandem's rank group are told it
// (TANDEM_HOST_TYPES): "host=type,..." in the cluster's host order.
std::string host_types(const Cluster& c);

// The cluster a rank belongs to, for the plan's instance types; never throws (unknown
// types are warned of). What its launcher said, when it said it (`launcher.host_types`
// and `launcher.host`: one group per instance type); else discovered, as a rank of
// tandem's rank group (`launched`) or of another launcher whose torchrun variables
// describe the ranks, not the cluster, sees it without them.
Cluster cluster_for_plan(const ClusterOptions& opts, const LauncherEnv& launcher, bool launched,
                         const EnvLookup& env = process_env);

// A Slurm job's ports, the same on every host of the job without a word between them,
// and different for jobs that share a node (as torchrun users derive MASTER_PORT from
// SLURM_JOB_ID): three consecutive ports, the data workers', the trainers' rendezvous
// one above, their end-of-job channel (--release-port, by default the rendezvous port +
// 1) one above that. Slot id mod kJobPortSlots of those outside Linux's default
// ephemeral range (32768-60999, where the kernel picks outgoing connections' ports, so
// one may hold a job's port first): 20000-32767, then 61000-65535. nullopt outside
// Slurm, or when the job's id (SLURM_HET_JOB_ID, else SLURM_JOB_ID) is not a number.
// Jobs whose ids are kJobPortSlots apart share ports: on one node, that many jobs apart.
inline constexpr int kJobPortsFirst = 20000;
inline constexpr int kJobPortsLowSlots = (32768 - kJobPortsFirst) / 3;  // 4,256: 20000..32767
inline constexpr int kJobPortsHighFirst = 61000;
inline constexpr int kJobPortsHighSlots = (65536 - kJobPortsHighFirst) / 3;  // 1,512: 61000..65535
inline constexpr int kJobPortSlots = kJobPortsLowSlots + kJobPortsHighSlots;
struct JobPorts {
  std::string job;  // the id they came from
  int worker = 0;
  int master = 0;
};
std::optional<JobPorts> slurm_job_ports(const Cluster& c);

// Why `ports` may be taken by the kernel on this host: "" when none of the three lies in
// `range` (ip_local_port_range's text, "32768\t60999"), else a warning naming them, the
// range and the fixes. Hosts may be configured otherwise than Linux's default.
std::string ephemeral_clash(const JobPorts& ports, const std::string& range);

}  // namespace tandem::cluster
