// Cluster discovery: from the SageMaker environment (or torchrun's, or nothing) to one
// plain description of the job's hosts and instance groups.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tandem/common/settings.h"

namespace tandem::cluster {

struct InstanceGroup {
  std::string name;
  std::string instance_type;
  std::vector<std::string> hosts;  // sorted
};

struct Cluster {
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
};

// Reads one environment variable; injectable so tests need not touch the process env.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The real process environment.
std::optional<std::string> process_env(const std::string& name);

// Parses the text of a resourceconfig.json. `path` is only used in error messages.
// Throws ConfigError naming the file, the field and the fix.
Cluster parse_resource_config(const std::string& json_text, const std::string& path);

// Discovers the cluster, in order of precedence: <root>/input/config/resourceconfig.json,
// then SageMaker toolkit variables (SM_CURRENT_HOST, SM_HOSTS, SM_CURRENT_INSTANCE_GROUP,
// SM_INSTANCE_GROUPS_DICT, SM_CURRENT_INSTANCE_TYPE), then torchrun variables (RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR), then a single local host.
// Flags (opts.current_host) override what was discovered.
Cluster discover(const ClusterOptions& opts, const EnvLookup& env = process_env);

}  // namespace tandem::cluster
