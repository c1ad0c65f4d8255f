// Cluster discovery: the sources in order of precedence (cluster.h), then the flags.
// Each source lives in its own file and goes through detail::assemble (draft.h).
#include "tandem/cluster/cluster.h"

#include <spdlog/spdlog.h>

#include "draft.h"
#include "tandem/common/text.h"

namespace tandem::cluster {
namespace {

using namespace detail;

Cluster local_cluster() {
  InstanceGroup group{"local", "local", {"localhost"}};
  Cluster c;
  c.current_host = "localhost";
  c.current_group = group.name;
  c.current_instance_type = group.instance_type;
  c.hosts = group.hosts;
  c.groups = {group};
  c.source = "default (no resourceconfig.json, SM_*, torchrun, Slurm or JobSet variables: one local host)";
  for (const char* key : {"current_host", "hosts", "groups", "current_group", "current_instance_type"}) {
    c.origin[key] = "default";
  }
  return c;
}

void apply_current_host(Cluster& c, const std::string& host) {
  if (host.empty()) return;
  // With hosts shared between groups (Slurm), the group already found stays.
  if (contains(c.hosts, host) && host == c.current_host) {
    c.origin["current_host"] = "--current-host";
    return;
  }
  for (const auto& g : c.groups) {
    if (!contains(g.hosts, host)) continue;
    c.current_host = host;
    c.current_group = g.name;
    c.current_instance_type = g.instance_type;
    for (const char* key : {"current_host", "current_group", "current_instance_type"}) {
      c.origin[key] = "--current-host";
    }
    return;
  }
  fail("--current-host " + printable(host, 80), "is not a host of this job (hosts: " + join(c.hosts) + "; from " + c.source + ")",
       "pass one of those hosts, or drop --current-host");
}

Cluster discover_sources(const std::string& root, const EnvLookup& env) {
  if (auto c = from_resource_config_file(root)) return *c;
  if (auto c = from_sagemaker_env(env)) return *c;
  if (auto c = from_torchrun_env(env)) return *c;
  if (auto c = from_slurm_env(env)) return *c;
  if (auto c = from_jobset_env(env)) return *c;
  return local_cluster();
}

}  // namespace

Cluster cluster_for_plan(const ClusterOptions& opts, bool launched, const EnvLookup& env) {
  try {
    return discover(opts, [&](const std::string& name) -> std::optional<std::string> {
      if (launched && (name == "WORLD_SIZE" || name == "RANK" || name == "GROUP_RANK")) return std::nullopt;
      return env(name);
    });
  } catch (const std::exception& e) {
    spdlog::warn("instance types unknown for the plan: {}", e.what());
    return {};
  }
}

Cluster discover(const ClusterOptions& opts, const EnvLookup& env) {
  Cluster c = discover_sources(opts.sagemaker_root, env);
  apply_current_host(c, opts.current_host);
  return c;
}

}  // namespace tandem::cluster
