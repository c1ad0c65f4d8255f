// Role resolution: which instance groups train and which serve data.
#include "tandem/cluster/roles.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::cluster {
namespace {

// Each group's role and the reason for it, in group order.
struct Assignment {
  std::vector<std::string> trainers, workers;
  std::vector<std::string> trainer_why, worker_why;

  void train(const InstanceGroup& g, const std::string& why) {
    trainers.push_back(g.name);
    trainer_why.push_back(g.name + ": " + why);
  }
  void serve(const InstanceGroup& g, const std::string& why) {
    workers.push_back(g.name);
    worker_why.push_back(g.name + ": " + why);
  }
};

[[noreturn]] void fail(const std::string& where, const std::string& problem,
                       const std::string& fix) {
  throw ConfigError(where + ": " + problem + ". Fix: " + fix);
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

std::vector<std::string> group_names(const Cluster& cluster) {
  std::vector<std::string> names;
  for (const auto& g : cluster.groups) names.push_back(g.name);
  return names;
}

// The groups a flag names, checked against the cluster, sorted and without repeats.
std::set<std::string> named_groups(const Cluster& cluster, const std::vector<std::string>& names,
                                   const std::string& flag) {
  const auto known = group_names(cluster);
  std::set<std::string> out;
  for (const auto& name : names) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      fail(flag + " " + printable(name, 80),
           "is not an instance group of this job (" + cluster.source + " has " + join(known) + ")",
           "pass one of: " + join(known));
    }
    out.insert(name);
  }
  return out;
}

Assignment assign_by_default(const Cluster& cluster) {
  Assignment a;
  if (cluster.groups.size() == 1) {
    a.train(cluster.groups.front(), "the only instance group: every host trains");
    return a;
  }
  // Known GPUs decide; else an instance type's family; what is left is settled by
  // elimination: with a trainer found the rest serve, and a lone unknown group trains
  // when every other group is known to serve (a Slurm task sees only its own GPUs).
  std::vector<std::string> listing;
  std::vector<const InstanceGroup*> unknown;
  for (const auto& g : cluster.groups) {
    listing.push_back(g.name + " (" + g.instance_type + ")");
    if (g.gpus_per_host > 0) {
      a.train(g, std::to_string(g.gpus_per_host) + " GPUs per host");
    } else if (g.gpus_per_host == 0) {
      a.serve(g, "no GPUs");
    } else if (is_instance_type(g.instance_type)) {
      if (is_gpu_instance_type(g.instance_type)) a.train(g, g.instance_type + " is a GPU instance family");
      else a.serve(g, g.instance_type + " is not a GPU instance family");
    } else {
      unknown.push_back(&g);
    }
  }
  if (!a.trainers.empty()) {
    for (const InstanceGroup* g : unknown) a.serve(*g, "GPUs unknown here, and " + a.trainers.front() + " trains");
  } else if (unknown.size() == 1) {
    a.train(*unknown.front(), "GPUs unknown here, and every other group serves");
  } else {
    fail(cluster.source,
         "no instance group has GPUs or is a GPU instance family (ml.p*, ml.g*): " + join(listing) +
             ", so which one trains is ambiguous",
         "name the training group with --trainer-group NAME, e.g. --trainer-group " +
             cluster.groups.front().name);
  }
  return a;
}

Assignment assign_by_flags(const Cluster& cluster, const std::set<std::string>& trainers,
                           const std::set<std::string>& workers) {
  Assignment a;
  for (const auto& g : cluster.groups) {
    if (trainers.count(g.name)) {
      a.train(g, "--trainer-group");
    } else if (workers.count(g.name)) {
      a.serve(g, "--worker-group");
    } else if (workers.empty()) {
      a.serve(g, "not named by --trainer-group");
    } else if (trainers.empty()) {
      a.train(g, "not named by --worker-group");
    } else {
      fail("--trainer-group/--worker-group", "instance group " + g.name + " is named by neither",
           "name it with --trainer-group or --worker-group");
    }
  }
  if (a.trainers.empty()) {
    fail("--worker-group", "names every instance group (" + join(group_names(cluster)) +
                               "), so no group trains",
         "leave a group out of --worker-group, or name it with --trainer-group");
  }
  return a;
}

Assignment assign(const Cluster& cluster, const ClusterOptions& opts) {
  const auto trainers = named_groups(cluster, opts.trainer_groups, "--trainer-group");
  const auto workers = named_groups(cluster, opts.worker_groups, "--worker-group");
  for (const auto& name : trainers) {
    if (workers.count(name)) {
      fail("--trainer-group/--worker-group", "instance group " + name + " is named by both",
           "name each group either as a trainer or as a worker group");
    }
  }
  if (trainers.empty() && workers.empty()) return assign_by_default(cluster);
  return assign_by_flags(cluster, trainers, workers);
}

std::vector<std::string> hosts_of(const Cluster& cluster, const std::vector<std::string>& groups) {
  std::vector<std::string> hosts;
  for (const auto& g : cluster.groups) {
    if (std::find(groups.begin(), groups.end(), g.name) == groups.end()) continue;
    hosts.insert(hosts.end(), g.hosts.begin(), g.hosts.end());
  }
  std::sort(hosts.begin(), hosts.end());
  return hosts;
}

}  // namespace

const char* role_name(Role role) { return role == Role::kTrainer ? "trainer" : "worker"; }

bool is_instance_type(const std::string& instance_type) {
  // family (letters, a generation digit, options) "." size: c5.18xlarge, p4d.24xlarge, g5.xlarge
  std::string_view t = instance_type;
  if (t.starts_with("ml.")) t.remove_prefix(3);
  const size_t dot = t.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == t.size()) return false;
  bool digit = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const auto c = static_cast<unsigned char>(t[i]);
    if (i == dot) continue;
    if (!std::islower(c) && !std::isdigit(c) && c != '-') return false;
    if (i < dot && std::isdigit(c)) digit = true;
  }
  return digit && std::islower(static_cast<unsigned char>(t[0])) && t.find('.', dot + 1) == std::string_view::npos;
}

bool is_gpu_instance_type(const std::string& instance_type) {
  std::string_view family = instance_type;
  if (family.starts_with("ml.")) family.remove_prefix(3);
  return family.size() >= 2 && (family[0] == 'p' || family[0] == 'g') &&
         std::isdigit(static_cast<unsigned char>(family[1]));
}

RolePlan resolve_roles(const Cluster& cluster, const ClusterOptions& opts) {
  Assignment a = assign(cluster, opts);
  RolePlan plan;
  plan.trainer_groups = a.trainers;
  plan.worker_groups = a.workers;
  std::sort(plan.trainer_groups.begin(), plan.trainer_groups.end());
  std::sort(plan.worker_groups.begin(), plan.worker_groups.end());
  plan.trainer_hosts = hosts_of(cluster, plan.trainer_groups);
  plan.worker_hosts = hosts_of(cluster, plan.worker_groups);
  plan.homogeneous = plan.worker_groups.empty();

  const bool trains = std::find(a.trainers.begin(), a.trainers.end(), cluster.current_group) !=
                      a.trainers.end();
  plan.role = trains ? Role::kTrainer : Role::kWorker;
  const auto& mine = trains ? plan.trainer_hosts : plan.worker_hosts;
  auto it = std::find(mine.begin(), mine.end(), cluster.current_host);
  if (it == mine.end()) {
    fail(cluster.source,
         "current host " + cluster.current_host + " is not a host of its group " +
             cluster.current_group,
         "list the current host in its instance group");
  }
  plan.host_index = static_cast<int>(it - mine.begin());

  plan.origin["role"] = cluster.current_host + " is in " + cluster.current_group + ", a " +
                        role_name(plan.role) + " group";
  plan.origin["trainer_groups"] = join(a.trainer_why, "; ");
  plan.origin["worker_groups"] =
      plan.homogeneous ? "none: every host trains with local preprocessing"
                       : join(a.worker_why, "; ");
  return plan;
}

}  // namespace tandem::cluster
