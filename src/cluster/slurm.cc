// A Slurm job: its nodes from SLURM_JOB_NODELIST, and for a heterogeneous job one
// instance group per component ("het-group-<n>", as srun --het-group=<n> names it) from
// SLURM_JOB_NODELIST_HET_GROUP_<n>. Releases before 20.02 say PACK where later ones say
// HET; both are read. The component with GPUs trains, the others serve data.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "draft.h"
#include "tandem/cluster/cluster.h"
#include "tandem/cluster/slurm.h"
#include "tandem/common/text.h"

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

// GPUs on this node for this task's component, and the variable that says so. Slurm
// 22.05 sets SLURM_GPUS_ON_NODE and SLURM_STEP_GPUS per component, correctly; it copies
// SLURM_JOB_GPUS from the batch script (component 0), so that one is not read.
std::pair<int, std::string> own_gpus(const EnvLookup& env) {
  if (auto v = get(env, "SLURM_GPUS_ON_NODE")) return {env_int("SLURM_GPUS_ON_NODE", *v, 0, kWho), "SLURM_GPUS_ON_NODE"};
  if (auto v = get(env, "SLURM_STEP_GPUS")) {  // "0,1,2,3"
    return {static_cast<int>(std::count(v->begin(), v->end(), ',')) + 1, "SLURM_STEP_GPUS"};
  }
  return {0, "no SLURM_GPUS_ON_NODE"};
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

// The shell salloc starts for a heterogeneous job runs where salloc ran, outside every
// component, with only the components' variables: say so, and how to reach the nodes.
[[noreturn]] void outside_the_nodes(const EnvLookup& env, const std::vector<InstanceGroup>& groups) {
  std::string parts, components;
  for (size_t k = 0; k < groups.size(); ++k) components += (k ? "," : "") + std::to_string(k);
  for (const auto& g : groups) {
    std::string hosts;
    for (const auto& h : g.hosts) hosts += (hosts.empty() ? "" : ",") + h;
    parts += (parts.empty() ? "" : "; ") + g.name + " (" + g.instance_type + "): " + hosts;
  }
  const std::string where = get(env, "SLURM_SUBMIT_HOST").value_or("the host salloc ran on");
  fail(env_where("SLURMD_NODENAME"),
       "is not set: this is a shell of heterogeneous job " + get(env, "SLURM_JOB_ID").value_or("?") + " on " + where +
           " (salloc's), not a task on its nodes (" + parts + ")",
       "start tandem on the nodes, one task per node over every component: srun --het-group=" + components +
           " --ntasks-per-node=1 tandem launch ... (the same with tandem inspect shows each task's role)");
}

// This task's component, and how it was found. Slurm 22.05 sets no variable that says
// it (SLURM_HET_JOB_OFFSET reaches only prolog and epilog scripts), so, in order:
//  1. TANDEM_HET_GROUP (srun --het-group=1 --export=ALL,TANDEM_HET_GROUP=1 ...), or
//     SLURM_HET_JOB_OFFSET / SLURM_PACK_JOB_OFFSET where a release sets them;
//  2. one srun step over every component (srun --het-group=0,1): SLURM_PROCID counts the
//     tasks of component 0 first, then those of component 1, ...;
//  3. the batch script or an srun step of one component: SLURM_JOB_NODELIST is that
//     component's node list;
//  4. the one component whose nodes include SLURMD_NODENAME.
std::pair<int, std::string> own_component(const EnvLookup& env, const std::vector<InstanceGroup>& groups) {
  const int n = static_cast<int>(groups.size());
  if (auto given = first_of(env, {"TANDEM_HET_GROUP", "SLURM_HET_JOB_OFFSET", "SLURM_PACK_JOB_OFFSET"})) {
    const int k = env_int(given->name, given->value, 0, kWho);
    if (k >= n) {
      fail(env_where(given->name), "is " + given->value + " but the job has " + std::to_string(n) + " components",
           "set it to the component this srun starts (0.." + std::to_string(n - 1) + ")");
    }
    return {k, given->name};
  }
  std::vector<int> tasks;
  for (int k = 0; k < n; ++k) {
    auto t = component_var(env, "SLURM_NTASKS", k);
    tasks.push_back(t ? env_int(t->name, t->value, 0, kWho) : -1);
  }
  const auto step_tasks = first_of(env, {"SLURM_STEP_NUM_TASKS"});
  const auto procid = first_of(env, {"SLURM_PROCID"});
  if (step_tasks && procid && std::find(tasks.begin(), tasks.end(), -1) == tasks.end() && n > 1) {
    long total = 0;
    for (int t : tasks) total += t;
    if (env_int(step_tasks->name, step_tasks->value, 0, kWho) == total) {
      int rank = env_int("SLURM_PROCID", procid->value, 0, kWho);
      for (int k = 0; k < n; ++k) {
        if (rank < tasks[k]) return {k, "SLURM_PROCID among SLURM_NTASKS_HET_GROUP_<n> (one step over every component)"};
        rank -= tasks[k];
      }
    }
  }
  if (auto list = first_of(env, {"SLURM_JOB_NODELIST"})) {
    auto nodes = expand_hostlist(list->value, env_where(list->name));
    std::sort(nodes.begin(), nodes.end());
    std::vector<int> same;
    for (int k = 0; k < n; ++k) {
      auto hosts = groups[k].hosts;
      std::sort(hosts.begin(), hosts.end());
      if (hosts == nodes) same.push_back(k);
    }
    if (same.size() == 1) return {same.front(), "SLURM_JOB_NODELIST (the component's own nodes)"};
  }
  if (!get(env, "SLURMD_NODENAME")) outside_the_nodes(env, groups);
  std::vector<int> holding;
  const std::string node = get(env, "SLURMD_NODENAME").value_or("");
  for (int k = 0; k < n; ++k) {
    if (contains(groups[k].hosts, node)) holding.push_back(k);
  }
  if (holding.size() == 1) return {holding.front(), "SLURMD_NODENAME (in one component only)"};
  fail(env_where("TANDEM_HET_GROUP"),
       "is not set, and node " + node + " is in " + (holding.empty() ? "no component" : "several components") +
           " of the job, so this task's component is unknown",
       "start tandem with one srun over every component (srun --het-group=0,1 tandem launch), or tell each "
       "component which it is: srun --het-group=0 --export=ALL,TANDEM_HET_GROUP=0 tandem launch : "
       "--het-group=1 --export=ALL,TANDEM_HET_GROUP=1 tandem launch");
}

std::string short_name(const std::string& host) { return host.substr(0, host.find('.')); }

// This task's node: SLURMD_NODENAME, which every task and batch script has. Without it
// this is salloc's shell, on the host salloc ran on (a login node), or a shell logged in
// to a node of the job: this machine's name must be one of the job's nodes, or whatever
// starts here would run outside the allocation (--current-host cannot make it one).
std::string this_node(const EnvLookup& env, const std::vector<std::string>& nodes) {
  if (auto node = get(env, "SLURMD_NODENAME")) return *node;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  const std::string here = short_name(name);
  for (const std::string& n : nodes) {
    if (short_name(n) == here) return n;
  }
  std::string list;
  for (const std::string& n : nodes) list += (list.empty() ? "" : ",") + n;
  fail(env_where("SLURMD_NODENAME"),
       "is not set, and this machine (" + printable(here, 80) + ") is not one of job " +
           get(env, "SLURM_JOB_ID").value_or("?") + "'s nodes (" + list +
           "): this is the shell salloc started on the host it ran on, and anything tandem started here would run "
           "outside the allocation",
       "start tandem on the job's nodes, one task per node: srun --ntasks-per-node=1 tandem launch ... (srun "
       "--het-group=0,1 ... for a heterogeneous job)");
}

}  // namespace

std::optional<Cluster> from_slurm_env(const EnvLookup& env) {
  const auto het = first_of(env, {"SLURM_HET_SIZE", "SLURM_PACK_SIZE"});
  // salloc's shell of a heterogeneous job has the components' node lists only.
  if (!get(env, "SLURM_JOB_ID") || !(het || first_of(env, {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}))) return std::nullopt;
  const int components = het ? env_int(het->name, het->value, 1, kWho) : 0;
  if (components > 64) fail(env_where(het->name), "counts " + het->value + " components", "check the job");
  Draft d;
  Labels labels{env_where("SLURMD_NODENAME"), env_where("SLURM_JOB_NODELIST"), env_where("SLURM_JOB_NODELIST"),
                env_where("TANDEM_HET_GROUP"), env_where("SLURM_JOB_PARTITION"), {}};
  for (int i = het ? 0 : -1; i < components; ++i) {
    InstanceGroup g;
    g.name = i < 0 ? "slurm" : "het-group-" + std::to_string(i);
    g.hosts = nodes_of(env, i);
    // The partition says what kind of node it is; plan and report show it.
    g.instance_type = component_var(env, "SLURM_JOB_PARTITION", i).value_or(Found{"slurm", ""}).value;
    for (const auto& host : g.hosts) {
      if (!contains(d.hosts, host)) d.hosts.push_back(host);
    }
    labels.group.push_back(env_where(i < 0 ? "SLURM_JOB_NODELIST" : "SLURM_JOB_NODELIST_HET_GROUP_" + std::to_string(i)));
    d.groups.push_back(std::move(g));
  }
  // Slurm does not put two components on one node, but nothing here depends on it.
  d.shared_hosts = true;
  const auto [own, own_origin] = het ? own_component(env, d.groups) : std::pair<int, std::string>{0, "the only group"};
  // A task sees its own component's GPUs only; the others' stay unknown, and role
  // resolution settles them by elimination (cluster/roles.h).
  const auto [gpus, gpus_origin] = own_gpus(env);
  d.groups[own].gpus_per_host = gpus;
  const auto node = this_node(env, d.hosts);
  // tandem runs one task per node: a worker per CPU node, and the trainer starts a rank
  // per GPU itself. A second task on a node would fight the first for its port.
  if (auto local = get(env, "SLURM_LOCALID"); local && env_int("SLURM_LOCALID", *local, 0, kWho) > 0) {
    fail(env_where("SLURM_LOCALID"), "is " + *local + ": this is task " + *local + " on node " + node +
                                         ", but tandem runs one task per node",
         "start it with srun --ntasks-per-node=1 (and #SBATCH --ntasks-per-node=1 in each component)");
  }
  d.current_host = node;
  d.current_group = d.groups[own].name;
  Cluster c = assemble(d, labels);
  const std::string id = get(env, "SLURM_JOB_ID").value_or("");
  c.platform = Platform::kSlurm;
  c.source = het ? "Slurm heterogeneous job " + id + " (" + het->name + "=" + het->value + ")" : "Slurm job " + id;
  c.origin["current_host"] = get(env, "SLURMD_NODENAME") ? "SLURMD_NODENAME" : "this machine's name, a node of the job";
  c.origin["hosts"] = het ? "SLURM_JOB_NODELIST_HET_GROUP_<n>" : "SLURM_JOB_NODELIST";
  c.origin["groups"] = het ? "one per component of " + het->name : "the whole job (not heterogeneous)";
  c.origin["current_group"] = own_origin;
  c.origin["current_instance_type"] = "SLURM_JOB_PARTITION";
  c.origin["gpus_per_host"] = d.groups[own].name + ": " + std::to_string(gpus) + " (" + gpus_origin + ")";
  for (const char* name : {"SLURM_JOB_ID", "SLURM_HET_JOB_ID", "SLURM_PROCID", "SLURM_NODEID", "SLURM_LOCALID", "SLURM_NTASKS",
                           "SLURM_STEP_NUM_TASKS", "CUDA_VISIBLE_DEVICES"}) {
    if (auto v = get(env, name)) c.details[name] = *v;
  }
  return c;
}

}  // namespace tandem::cluster::detail

namespace tandem::cluster {

std::optional<JobPorts> slurm_job_ports(const Cluster& c) {
  const auto het = c.details.find("SLURM_HET_JOB_ID");
  const auto one = c.details.find("SLURM_JOB_ID");
  const std::string* id = het != c.details.end() ? &het->second : one != c.details.end() ? &one->second : nullptr;
  if (!id) return std::nullopt;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(id->data(), id->data() + id->size(), n);
  if (ec != std::errc() || end != id->data() + id->size()) return std::nullopt;
  const int slot = static_cast<int>(n % kJobPortSlots);
  const int base = slot < kJobPortsLowSlots ? kJobPortsFirst + 3 * slot
                                            : kJobPortsHighFirst + 3 * (slot - kJobPortsLowSlots);
  return JobPorts{*id, base, base + 1};
}

std::string ephemeral_clash(const JobPorts& ports, const std::string& range) {
  int lo = 0;
  int hi = 0;
  if (std::sscanf(range.c_str(), "%d %d", &lo, &hi) != 2 || lo > hi) return "";
  std::vector<int> inside;
  for (int p : {ports.worker, ports.master, ports.master + 1}) {
    if (p >= lo && p <= hi) inside.push_back(p);
  }
  if (inside.empty()) return "";
  std::string list;
  for (int p : inside) list += (list.empty() ? "" : ", ") + std::to_string(p);
  return fmt::format("Slurm job {}'s port{} {} lie{} in this host's ephemeral port range {}-{} "
                     "(net.ipv4.ip_local_port_range), where the kernel picks the ports of outgoing connections: one "
                     "may be taken when tandem listens. Reserve them (sysctl net.ipv4.ip_local_reserved_ports), or "
                     "choose ports outside the range with --worker-port and --master-port",
                     ports.job, inside.size() == 1 ? "" : "s", list, inside.size() == 1 ? "s" : "", lo, hi);
}

}  // namespace tandem::cluster
