#include <spdlog/spdlog.h>

#include "tandem/cluster/cluster.h"
#include "tandem/cluster/roles.h"
#include "tandem/common/error.h"
#include "tandem/launch/roles.h"

namespace tandem::launch {

int run_launch(const Settings& settings) {
  const cluster::Cluster c = cluster::discover(settings.cluster);
  const cluster::RolePlan plan = cluster::resolve_roles(c, settings.cluster);
  spdlog::info("host {} of group {} ({}): role {} (from {})", c.current_host, c.current_group,
               c.current_instance_type, cluster::role_name(plan.role), plan.origin.count("role") ? plan.origin.at("role") : c.source);
  if (plan.role == cluster::Role::kWorker) {
    Settings s = settings;
    if (!s.worker.port) s.worker.port = cluster::worker_endpoint(c.current_host, s.cluster).port;
    return run_worker(s, c.current_host);
  }
  if (plan.trainer_hosts.size() > 1) {
    throw ConfigError("the trainer groups have " + std::to_string(plan.trainer_hosts.size()) +
                      " hosts, but this version trains on one trainer host: use one trainer host");
  }
  std::vector<std::string> targets;
  for (const std::string& host : plan.worker_hosts) {
    cluster::Endpoint ep = cluster::worker_endpoint(host, settings.cluster);
    ep.address = cluster::resolve_host(ep.address, settings.cluster.resolve_timeout_s);
    targets.push_back(ep.target());
  }
  return run_trainer(settings, targets, c.current_host);
}

}  // namespace tandem::launch
