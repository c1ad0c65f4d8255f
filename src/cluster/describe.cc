// The JSON that `tandem inspect` prints.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/roles.h"

namespace tandem::cluster {
namespace {

using nlohmann::json;

json groups_json(const Cluster& cluster, const RolePlan& plan) {
  json groups = json::array();
  for (const auto& g : cluster.groups) {
    const bool trains = std::find(plan.trainer_groups.begin(), plan.trainer_groups.end(),
                                  g.name) != plan.trainer_groups.end();
    groups.push_back({{"name", g.name},
                      {"instance_type", g.instance_type},
                      {"hosts", g.hosts},
                      {"role", role_name(trains ? Role::kTrainer : Role::kWorker)}});
    if (g.gpus_per_host >= 0) groups.back()["gpus_per_host"] = g.gpus_per_host;
  }
  return groups;
}

// A trainer learns its rank range and whom to ask for batches; a worker, where it listens.
void add_role_details(json& out, const RolePlan& plan, const Cluster& cluster, const ClusterOptions& opts,
                      int procs_per_host, const std::vector<std::string>& named, const std::string& service) {
  if (plan.role == Role::kWorker) {
    out["worker_address"] = worker_endpoint(cluster.current_host, opts).target();
    return;
  }
  out["trainer_ranks"] = {{"first", plan.host_index * procs_per_host}, {"count", procs_per_host}};
  json workers = json::array();
  if (named.empty() && service.empty()) {
    for (const auto& host : plan.worker_hosts) workers.push_back(worker_endpoint(host, opts).target());
  }
  for (const auto& target : named) workers.push_back(with_default_port(target, opts.worker_port));
  out["workers"] = workers;
  if (!service.empty()) out["worker_service"] = service;
}

}  // namespace

json describe(const Cluster& cluster, const RolePlan& plan, const ClusterOptions& opts, int procs_per_host,
              const std::vector<std::string>& named_workers, const std::string& worker_service) {
  json out;
  out["source"] = cluster.source;
  out["current_host"] = cluster.current_host;
  out["current_group"] = cluster.current_group;
  out["current_instance_type"] = cluster.current_instance_type;
  out["network_interface"] = cluster.network_interface;
  out["hosts"] = cluster.hosts;
  out["groups"] = groups_json(cluster, plan);
  out["role"] = role_name(plan.role);
  out["homogeneous"] = plan.homogeneous;
  out["host_index"] = plan.host_index;
  out["trainer_hosts"] = plan.trainer_hosts;
  out["worker_hosts"] = plan.worker_hosts;
  add_role_details(out, plan, cluster, opts, procs_per_host, named_workers, worker_service);
  if (!cluster.details.empty()) out["details"] = cluster.details;
  if (cluster.ranks_started) out["ranks_started_by_launcher"] = true;
  json origin = cluster.origin;
  for (const auto& [key, value] : plan.origin) origin[key] = value;
  out["origin"] = origin;
  return out;
}

}  // namespace tandem::cluster
