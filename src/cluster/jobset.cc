// A Kubernetes JobSet (jobset.x-k8s.io): each replicated job is an instance group. The
// JobSet controller labels every pod with its JobSet, replicated job and job index and
// gives it a stable DNS name, <jobset>-<replicated job>-<job index>-<pod index>.<subdomain>;
// the manifest passes the labels in through the downward API and names the replicated
// jobs in TANDEM_JOBSET_GROUPS (examples/kubernetes/jobset.yaml). Their replicas come
// from the spec, written there (workers=2,trainer=1), or from the pod's own labels
// (workers,trainer): its replicated job's replicas and the JobSet's total, which leave
// one other count to work out.
#include <algorithm>
#include <charconv>

#include "draft.h"

namespace tandem::cluster::detail {
namespace {

constexpr const char* kGroups = "TANDEM_JOBSET_GROUPS";
constexpr int kMaxPods = 100000;

struct Replicated {
  std::string name;
  int replicas = 0;     // jobs; 0: not written, taken from the pod's labels
  int parallelism = 1;  // pods per job
};

// A DNS label, as Kubernetes requires of the names that make up a pod's host name.
bool dns_label(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

int count(const std::string& text, const std::string& item) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 1 || v > kMaxPods) {
    fail(env_where(kGroups), "\"" + item + "\" has the count \"" + text + "\", not a whole number from 1 to " +
                                 std::to_string(kMaxPods),
         "write NAME=REPLICAS or NAME=REPLICASxPARALLELISM, e.g. workers=2,trainer=1");
  }
  return v;
}

// "workers=2,trainer=1", "workers=2x4" (replicas x pods per job) or "workers,trainer".
std::vector<Replicated> parse_groups(const std::string& text) {
  std::vector<Replicated> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    const size_t eq = item.find('=');
    Replicated r;
    r.name = item.substr(0, eq);
    if (!dns_label(r.name)) {
      fail(env_where(kGroups),
           std::string(1, '"').append(printable_name(item, env_where(kGroups))).append("\" is not NAME or NAME=REPLICAS with NAME a replicated job's name"),
           "list the JobSet's replicated jobs as they are named in its spec, e.g. workers,trainer or workers=2,trainer=1");
    }
    if (eq != std::string::npos) {
      const std::string n = item.substr(eq + 1);
      const size_t x = n.find('x');
      r.replicas = count(n.substr(0, x), item);
      if (x != std::string::npos) r.parallelism = count(n.substr(x + 1), item);
    }
    for (const auto& seen : out) {
      if (seen.name == r.name) fail(env_where(kGroups), "lists " + r.name + " twice", "list each replicated job once");
    }
    out.push_back(r);
  }
  return out;
}

// A label the manifest passes in; its absence means the manifest lacks the downward API entry.
std::string label(const EnvLookup& env, const std::string& name, const std::string& key) {
  auto v = get(env, name);
  if (!v) {
    fail(env_where(name), std::string("is not set although ") + kGroups + " is",
         "set it from the pod's label through the downward API: valueFrom: {fieldRef: {fieldPath: "
         "\"metadata.labels['jobset.sigs.k8s.io/" + key + "']\"}} (examples/kubernetes/jobset.yaml)");
  }
  return printable_name(*v, env_where(name));
}

// A count from one of the pod's labels: JobSet sets them all, but only the manifest can
// pass them in.
int label_count(const EnvLookup& env, const std::string& name, const std::string& key, const std::string& why) {
  auto v = get(env, name);
  if (!v) {
    fail(env_where(name), "is not set or empty although " + why,
         "set it from the pod's label through the downward API: valueFrom: {fieldRef: {fieldPath: "
         "\"metadata.labels['jobset.sigs.k8s.io/" + key + "']\"}} (examples/kubernetes/jobset.yaml); a JobSet "
         "controller that sets no such label needs the counts written: NAME=REPLICAS in " + kGroups);
  }
  return env_int(name, *v, 0, "Kubernetes");
}

// Fills the replicas TANDEM_JOBSET_GROUPS leaves out: the pod's own from its replicated
// job's label, one other from the JobSet's total. Written counts are checked against them.
void fill_counts(const EnvLookup& env, std::vector<Replicated>& groups, Replicated& own) {
  const std::string left_out = std::string(kGroups) + " leaves out the replicas of ";
  if (own.replicas == 0 || get(env, "REPLICATED_JOB_REPLICAS")) {
    const int mine = label_count(env, "REPLICATED_JOB_REPLICAS", "replicatedjob-replicas", left_out + own.name);
    if (own.replicas != 0 && own.replicas != mine) {
      fail(env_where(kGroups), "gives " + own.name + " " + std::to_string(own.replicas) + " replicas but its pods' label says " +
                                   std::to_string(mine), "make " + std::string(kGroups) + " match the JobSet's spec, or write only the names");
    }
    own.replicas = mine;
  }
  std::vector<Replicated*> unknown;
  long known = 0;
  for (auto& g : groups) {
    if (g.replicas == 0) unknown.push_back(&g);
    known += g.replicas;
  }
  if (unknown.empty()) return;
  if (unknown.size() > 1) {
    fail(env_where(kGroups), left_out + std::to_string(unknown.size()) + " replicated jobs besides this pod's",
         "write NAME=REPLICAS for all but one of the others: a pod's labels give its own count and the total only");
  }
  const int total = label_count(env, "JOBSET_GLOBAL_REPLICAS", "global-replicas", left_out + unknown[0]->name);
  if (total - known < 1) {
    fail(env_where("JOBSET_GLOBAL_REPLICAS"), "is " + std::to_string(total) + ", which leaves no replicas for " +
                                                  unknown[0]->name + " after the " + std::to_string(known) + " of the others",
         "list in " + std::string(kGroups) + " every replicated job of the JobSet, and no others");
  }
  unknown[0]->replicas = static_cast<int>(total - known);
}

// JOB_GLOBAL_INDEX, where the manifest passes it in: the jobs of the replicated jobs
// before this pod's, plus JOB_INDEX. A list out of the spec's order, or one that names a
// job the JobSet lacks, shows here.
void check_global_index(const EnvLookup& env, const std::vector<Replicated>& groups, const Replicated& own, int job) {
  auto v = get(env, "JOB_GLOBAL_INDEX");
  if (!v) return;
  long before = 0;
  for (const auto& g : groups) {
    if (&g == &own) break;
    before += g.replicas;
  }
  if (env_int("JOB_GLOBAL_INDEX", *v, 0, "Kubernetes") != before + job) {
    fail(env_where("JOB_GLOBAL_INDEX"), "is " + *v + " but " + kGroups + " puts this pod's job at " + std::to_string(before + job),
         "list the replicated jobs in " + std::string(kGroups) + " in the order of the JobSet's spec, each once");
  }
}

// JOB_INDEX: the pod's job among its replicated job's `replicas`.
int job_index(const EnvLookup& env, int replicas) {
  const std::string text = label(env, "JOB_INDEX", "job-index");
  const int v = env_int("JOB_INDEX", text, 0, "Kubernetes");
  if (v >= replicas) {
    fail(env_where("JOB_INDEX"), "is " + text + " but " + kGroups + " gives replicas only " + std::to_string(replicas),
         std::string("make ") + kGroups + " match the JobSet's spec");
  }
  return v;
}

// The pod's job index, once every count is known.
int own_job(const EnvLookup& env, std::vector<Replicated>& groups, const std::string& mine) {
  auto own = std::find_if(groups.begin(), groups.end(), [&](const Replicated& g) { return g.name == mine; });
  if (own == groups.end()) {
    fail(env_where("REPLICATED_JOB_NAME"), "is " + mine + ", which " + kGroups + " does not list",
         std::string("list every replicated job of the JobSet in ") + kGroups);
  }
  fill_counts(env, groups, *own);
  const int job = job_index(env, own->replicas);
  check_global_index(env, groups, *own, job);
  return job;
}

}  // namespace

std::optional<Cluster> from_jobset_env(const EnvLookup& env) {
  auto spec = get(env, kGroups);
  if (!spec) return std::nullopt;
  std::vector<Replicated> groups = parse_groups(*spec);
  const std::string jobset = label(env, "JOBSET_NAME", "jobset-name");
  const std::string mine = label(env, "REPLICATED_JOB_NAME", "replicatedjob-name");
  const std::string subdomain = get(env, "TANDEM_JOBSET_SUBDOMAIN").value_or(jobset);
  const int job = own_job(env, groups, mine);
  const Replicated* own = &*std::find_if(groups.begin(), groups.end(), [&](const Replicated& g) { return g.name == mine; });
  int pod = 0;
  if (get(env, "JOB_COMPLETION_INDEX")) {
    pod = env_int("JOB_COMPLETION_INDEX", *get(env, "JOB_COMPLETION_INDEX"), 0, "Kubernetes");
    if (pod >= own->parallelism) {
      fail(env_where("JOB_COMPLETION_INDEX"), "is " + std::to_string(pod) + " but " + kGroups + " gives " + mine +
                                                  " " + std::to_string(own->parallelism) + " pods per job",
           "write " + mine + "=REPLICASxPARALLELISM in " + kGroups);
    }
  }
  auto host = [&](const std::string& g, int j, int p) {
    return jobset + "-" + g + "-" + std::to_string(j) + "-" + std::to_string(p) + "." + subdomain;
  };
  Draft d;
  Labels labels{env_where("JOBSET_NAME"), env_where(kGroups), env_where(kGroups), env_where("REPLICATED_JOB_NAME"),
                env_where(kGroups), {}};
  long total = 0;
  for (const auto& g : groups) {
    total += static_cast<long>(g.replicas) * g.parallelism;
    if (total > kMaxPods) fail(env_where(kGroups), "makes more than " + std::to_string(kMaxPods) + " pods", "check the counts");
    InstanceGroup ig{g.name, kUnknownType, {}};
    for (int j = 0; j < g.replicas; ++j) {
      for (int p = 0; p < g.parallelism; ++p) ig.hosts.push_back(host(g.name, j, p));
    }
    d.hosts.insert(d.hosts.end(), ig.hosts.begin(), ig.hosts.end());
    d.groups.push_back(std::move(ig));
    labels.group.push_back(env_where(kGroups) + ", " + g.name);
  }
  d.current_host = host(mine, job, pod);
  d.current_group = mine;
  Cluster c = assemble(d, labels);
  c.platform = Platform::kJobSet;
  c.source = "Kubernetes JobSet " + jobset + " (" + kGroups + ", pod labels)";
  c.origin["hosts"] = std::string(kGroups) + " and JOBSET_NAME: <jobset>-<replicated job>-<job index>-<pod index>." +
                      (get(env, "TANDEM_JOBSET_SUBDOMAIN") ? "TANDEM_JOBSET_SUBDOMAIN" : "<jobset>");
  c.origin["groups"] = kGroups;
  c.origin["current_host"] = "JOBSET_NAME, REPLICATED_JOB_NAME, JOB_INDEX, JOB_COMPLETION_INDEX";
  c.origin["current_group"] = "REPLICATED_JOB_NAME";
  c.origin["current_instance_type"] = "default";
  c.details["JOBSET_NAME"] = jobset;
  c.details["subdomain"] = subdomain;
  return c;
}

}  // namespace tandem::cluster::detail
