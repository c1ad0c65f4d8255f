// A Slurm job: its nodes from SLURM_JOB_NODELIST, and for a heterogeneous job one
// instance group per component ("het-group-<n>", as srun --het-group=<n> names it) from
// SLURM_JOB_NODELIST_HET_GROUP_<n>. Releases before 20.02 say PACK where later ones say
// HET; both are read. The component with GPUs trains, the others serve data.
#include <algorithm>
#include <charconv>

#include "draft.h"
#include "tandem/cluster/slurm.h"

namespace tandem::cluster::detail {
namespace {

constexpr const char* kWho = "Slurm";

struct Found {
  std::string value;
  std::string name;  // the variable it came from
};

// The first of `names` that is set.
std::optional<Found> first_of(const EnvLookup& env, std::initializer_list<std::string> names) {
  for (const std::string& name : names) {
    if (auto v = get(env, name)) return Found{*v, name};
  }
  return std::nullopt;
}

// A component's variable: NAME_HET_GROUP_<n> or NAME_PACK_GROUP_<n>; for a job that is
// not heterogeneous (component -1), NAME itself.
std::optional<Found> component_var(const EnvLookup& env, const std::string& name, int component) {
  if (component < 0) return first_of(env, {name});
  const std::string n = std::to_string(component);
  return first_of(env, {name + "_HET_GROUP_" + n, name + "_PACK_GROUP_" + n});
}

// The last number in "gres/gpu:a100:4", "gpu:2", "4"; 1 for a bare "gres/gpu".
int trailing_count(const std::string& text) {
  size_t end = text.size();
  while (end > 0 && !std::isdigit(static_cast<unsigned char>(text[end - 1]))) --end;
  size_t start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(text[start - 1]))) --start;
  int v = 1;
  if (start < end && (start == 0 || text[start - 1] == ':')) std::from_chars(text.data() + start, text.data() + end, v);
  return v;
}

// GPUs per node of one component, from whichever variable this Slurm release sets, and
// the variable's name; 0 and "" when none says there are any.
std::pair<int, std::string> gpus_of(const EnvLookup& env, int component) {
  if (auto v = component_var(env, "SLURM_GPUS_ON_NODE", component)) {
    return {std::max(trailing_count(v->value), 0), v->name};
  }
  if (auto v = component_var(env, "SLURM_JOB_GPUS", component)) {  // "0,1,2,3"
    return {static_cast<int>(std::count(v->value.begin(), v->value.end(), ',')) + 1, v->name};
  }
  for (const char* name : {"SLURM_GPUS_PER_NODE", "SLURM_TRES_PER_NODE", "SLURM_JOB_GRES"}) {
    if (auto v = component_var(env, name, component)) {
      // "gres/gpu:4", "gres/gpu:a100:2,gres/shard:1", "gpu:1": the gpu entry's count.
      const std::string& text = v->value;
      for (size_t start = 0; start <= text.size();) {
        const size_t comma = std::min(text.find(',', start), text.size());
        const std::string entry = text.substr(start, comma - start);
        if (entry.find("gpu") != std::string::npos || std::string(name) == "SLURM_GPUS_PER_NODE") {
          return {trailing_count(entry), v->name};
        }
        start = comma + 1;
      }
    }
  }
  return {0, ""};
}

std::vector<std::string> nodes_of(const EnvLookup& env, int component) {
  auto list = component_var(env, "SLURM_JOB_NODELIST", component);
  if (!list && component < 0) list = first_of(env, {"SLURM_NODELIST"});
  if (!list) {
    const std::string n = std::to_string(component);
    fail(env_where("SLURM_JOB_NODELIST_HET_GROUP_" + n), "is not set although SLURM_HET_SIZE counts component " + n,
         "run tandem inside the job's allocation (sbatch or srun), where Slurm sets it");
  }
  std::vector<std::string> nodes = expand_hostlist(list->value, env_where(list->name));
  for (const auto& node : nodes) printable_name(node, env_where(list->name));
  return nodes;
}

// This process's component: the offset Slurm gives its tasks, else the one component
// whose nodes include this node.
int own_component(const EnvLookup& env, const std::vector<InstanceGroup>& groups, const std::string& node) {
  if (auto offset = first_of(env, {"SLURM_HET_JOB_OFFSET", "SLURM_PACK_JOB_OFFSET"})) {
    const int n = env_int(offset->name, offset->value, 0, kWho);
    if (n >= static_cast<int>(groups.size())) {
      fail(env_where(offset->name), "is " + offset->value + " but the job has " + std::to_string(groups.size()) +
                                        " components", "run tandem inside the job's allocation, where Slurm sets both");
    }
    return n;
  }
  std::vector<int> holding;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (contains(groups[i].hosts, node)) holding.push_back(static_cast<int>(i));
  }
  if (holding.size() == 1) return holding.front();
  fail(env_where("SLURMD_NODENAME"),
       "node " + node + (holding.empty() ? " is in no component of the job"
                                         : " is in several components and nothing says which this task belongs to"),
       "start tandem with srun inside the job (srun --het-group=0,1 tandem launch), so that Slurm sets "
       "SLURM_HET_JOB_OFFSET for each task");
}

}  // namespace

std::optional<Cluster> from_slurm_env(const EnvLookup& env) {
  if (!get(env, "SLURM_JOB_ID") || !first_of(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"})) return std::nullopt;
  const auto het = first_of(env, {"SLURM_HET_SIZE", "SLURM_PACK_SIZE"});
  const int components = het ? env_int(het->name, het->value, 1, kWho) : 0;
  if (components > 64) fail(env_where(het->name), "counts " + het->value + " components", "check the job");
  Draft d;
  Labels labels{env_where("SLURMD_NODENAME"), env_where("SLURM_JOB_NODELIST"), env_where("SLURM_JOB_NODELIST"),
                env_where("SLURM_HET_JOB_OFFSET"), env_where("SLURM_JOB_PARTITION"), {}};
  std::vector<std::string> gpu_origin;
  for (int i = het ? 0 : -1; i < components; ++i) {
    InstanceGroup g;
    g.name = i < 0 ? "slurm" : "het-group-" + std::to_string(i);
    g.hosts = nodes_of(env, i);
    // The partition says what kind of node it is; plan and report show it.
    g.instance_type = component_var(env, "SLURM_JOB_PARTITION", i).value_or(Found{"slurm", ""}).value;
    auto [gpus, from] = gpus_of(env, i);
    g.gpus_per_host = gpus;
    gpu_origin.push_back(g.name + ": " + std::to_string(gpus) + " GPUs per node (" + (from.empty() ? "no GPU variable" : from) + ")");
    for (const auto& host : g.hosts) {
      if (!contains(d.hosts, host)) d.hosts.push_back(host);
    }
    labels.group.push_back(env_where(i < 0 ? "SLURM_JOB_NODELIST" : "SLURM_JOB_NODELIST_HET_GROUP_" + std::to_string(i)));
    d.groups.push_back(std::move(g));
  }
  // Two components may share a node (small jobs, or one node with CPUs and GPUs).
  d.shared_hosts = true;
  auto node = get(env, "SLURMD_NODENAME");
  if (!node && d.hosts.size() == 1) node = d.hosts.front();
  if (!node) {
    fail(env_where("SLURMD_NODENAME"), "is not set, so this node is unknown among " + std::to_string(d.hosts.size()),
         "run tandem inside the job's allocation (sbatch or srun), where Slurm sets it, or pass --current-host");
  }
  d.current_host = *node;
  const int own = own_component(env, d.groups, *node);
  d.current_group = d.groups[own].name;
  Cluster c = assemble(d, labels);
  c.source = het ? "Slurm heterogeneous job " + get(env, "SLURM_JOB_ID").value_or("") + " (" + het->name + "=" + het->value + ")"
                 : "Slurm job " + get(env, "SLURM_JOB_ID").value_or("");
  c.origin["current_host"] = get(env, "SLURMD_NODENAME") ? "SLURMD_NODENAME" : "SLURM_JOB_NODELIST (one node)";
  c.origin["hosts"] = het ? "SLURM_JOB_NODELIST_HET_GROUP_<n>" : "SLURM_JOB_NODELIST";
  c.origin["groups"] = het ? "one per component of " + het->name + "; " + [&] {
    std::string all;
    for (const auto& o : gpu_origin) all += (all.empty() ? "" : "; ") + o;
    return all;
  }() : "the whole job (not heterogeneous)";
  c.origin["current_group"] = first_of(env, {"SLURM_HET_JOB_OFFSET", "SLURM_PACK_JOB_OFFSET"}).has_value()
                                  ? first_of(env, {"SLURM_HET_JOB_OFFSET", "SLURM_PACK_JOB_OFFSET"})->name
                                  : "the component whose nodes include SLURMD_NODENAME";
  c.origin["current_instance_type"] = "SLURM_JOB_PARTITION";
  for (const char* name : {"SLURM_JOB_ID", "SLURM_HET_JOB_ID", "SLURM_PROCID", "SLURM_NODEID", "SLURM_LOCALID",
                           "SLURM_NTASKS"}) {
    if (auto v = get(env, name)) c.details[name] = *v;
  }
  return c;
}

}  // namespace tandem::cluster::detail
