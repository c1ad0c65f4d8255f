// Cluster discovery: the sources in order of precedence (cluster.h), then the flags.
// Each source lives in its own file and goes through detail::assemble (draft.h).
#include "tandem/cluster/cluster.h"

#include <algorithm>

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

std::string host_types(const Cluster& c) {
  std::string out;
  for (const std::string& host : c.hosts) {
    for (const InstanceGroup& g : c.groups) {
      if (std::find(g.hosts.begin(), g.hosts.end(), host) == g.hosts.end()) continue;
      out += (out.empty() ? "" : ",") + host + "=" + g.instance_type;
    }
  }
  return out;
}

namespace {

// The cluster "host=type,..." describes, one group per instance type; `current` is this
// host. Entries without '=' are passed over.
Cluster cluster_of_host_types(const std::string& text, const std::string& current) {
  Cluster c;
  c.current_host = current;
  for (const std::string& entry : split_trimmed(text, ',')) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string host = entry.substr(0, eq), type = entry.substr(eq + 1);
    auto g = std::find_if(c.groups.begin(), c.groups.end(), [&](const InstanceGroup& x) { return x.name == type; });
    if (g == c.groups.end()) g = c.groups.insert(c.groups.end(), InstanceGroup{type, type, {}});
    g->hosts.push_back(host);
    c.hosts.push_back(host);
    if (host == current) c.current_instance_type = c.current_group = type;
  }
  return c;
}

}  // namespace

Cluster cluster_for_plan(const ClusterOptions& opts, const LauncherEnv& launcher, bool launched,
                         const EnvLookup& env) {
  if (!launcher.host_types.empty()) return cluster_of_host_types(launcher.host_types, launcher.host);
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
