// Internal to discovery: what one source (resourceconfig.json, SM_* variables, Slurm,
// a JobSet, torchrun) said, before checking, and the one `assemble` that checks every
// source the same way, with messages that name where the bad value lives.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tandem/cluster/cluster.h"

namespace tandem::cluster::detail {

inline constexpr const char* kHomogeneousGroup = "homogeneousCluster";
inline constexpr const char* kUnknownType = "unknown";

struct Draft {
  std::string current_host;
  std::optional<std::string> current_group;
  std::optional<std::string> current_instance_type;
  std::vector<std::string> hosts;
  std::vector<InstanceGroup> groups;  // empty: the source names no groups (homogeneous)
  std::string network_interface;
  // Slurm lets two components of a heterogeneous job share a node; everywhere else a
  // host is in exactly one group. With sharing, current_group must be given.
  bool shared_hosts = false;
};

// How error messages name each field of a source.
struct Labels {
  std::string current_host, hosts, groups, current_group, instance_type;
  std::vector<std::string> group;  // one per Draft::groups entry
};

[[noreturn]] void fail(const std::string& where, const std::string& problem, const std::string& fix);
std::string join(const std::vector<std::string>& items);  // "(none)" when empty
bool contains(const std::vector<std::string>& items, const std::string& item);
std::vector<std::string> group_names(const std::vector<InstanceGroup>& groups);

// Names end up in messages, logs and host lookups: a control character, a byte that is
// not UTF-8 and a name longer than kMaxNameBytes are refused (ConfigError naming `where`).
inline constexpr size_t kMaxNameBytes = 255;
std::string printable_name(std::string s, const std::string& where);

// An environment variable; an empty one is treated as unset (`export X=` is easy).
std::optional<std::string> get(const EnvLookup& env, const std::string& name);
std::string env_where(const std::string& name);  // "environment variable NAME"
// An integer >= min, or a ConfigError naming the variable; `who` sets it in the fix.
int env_int(const std::string& name, const std::string& text, int min, const std::string& who);

// Checks a draft and turns it into a sorted Cluster. A draft without groups is a
// homogeneous job: one group holding every host.
Cluster assemble(Draft d, Labels labels);

// The sources, each nullopt when its variables are absent.
std::optional<Cluster> from_resource_config_file(const std::string& sagemaker_root);
std::optional<Cluster> from_sagemaker_env(const EnvLookup& env);
std::optional<Cluster> from_torchrun_env(const EnvLookup& env);
std::optional<Cluster> from_slurm_env(const EnvLookup& env);
std::optional<Cluster> from_jobset_env(const EnvLookup& env);

}  // namespace tandem::cluster::detail
