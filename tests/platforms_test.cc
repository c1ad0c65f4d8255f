// Discovery beyond SageMaker, from recorded environments (tests/fixtures/platforms/):
// torchrun and Kubeflow, Slurm (heterogeneous jobs included), Kubernetes JobSets; and
// data workers named by --workers or a DNS name with one address per worker.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <set>
#include <unistd.h>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/cluster/cluster.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/roles.h"
#include "tandem/launch/settings.h"
#include "discovery_helpers.h"
#include "process_helpers.h"

namespace tandem::cluster {
namespace {

using namespace testing;
using Vars = std::map<std::string, std::string>;

// A recorded environment: KEY=VALUE lines; '#' starts a comment line.
Vars recorded(const std::string& name) {
  std::ifstream in(fs::path(TANDEM_FIXTURES) / "platforms" / name);
  EXPECT_TRUE(in) << "missing fixture " << name;
  Vars vars;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq != std::string::npos) vars[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return vars;
}

Cluster discover_env(const Vars& vars, const ClusterOptions& opts = {}) {
  ClusterOptions o = opts;
  o.sagemaker_root = "";
  return discover(o, env_of(vars));
}

// ---- torchrun -------------------------------------------------------------------------

// `tandem inspect` under torchrun's variables: this process is a rank already, the
// rendezvous is torchrun's, and the workers are those named on the command line.
TEST(Torchrun, InspectShowsTheRankItsRendezvousAndTheNamedWorkers) {
  const fs::path dir = tandem::testing::fresh_dir("inspect-torchrun");
  const std::string cmd = "env -i PATH=/usr/bin:/bin TANDEM_SAGEMAKER_ROOT=/nonexistent WORLD_SIZE=4 RANK=3 "
                          "LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 MASTER_ADDR=10.1.0.5 MASTER_PORT=29400 " +
                          std::string(TANDEM_BINARY) + " inspect --workers cpu-1,cpu-2:7000 > " +
                          (dir / "out.json").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << tandem::testing::slurp(dir / "out.json");
  const auto out = nlohmann::json::parse(tandem::testing::slurp(dir / "out.json"));
  EXPECT_TRUE(out["ranks_started_by_launcher"].get<bool>());
  EXPECT_EQ(out["details"]["MASTER_ADDR"], "10.1.0.5");
  EXPECT_EQ(out["details"]["MASTER_PORT"], "29400");
  EXPECT_EQ(out["details"]["RANK"], "3");
  EXPECT_EQ(out["role"], "trainer");
  EXPECT_EQ(out["workers"], nlohmann::json({"cpu-1:6000", "cpu-2:7000"}));
  EXPECT_TRUE(Mentions(out["origin"]["hosts"].get<std::string>(), {"index only", "MASTER_ADDR"}));
}

// ---- Data workers named directly --------------------------------------------------------

TEST(NamedWorkers, PortsDefaultToTheWorkerPortAndRepeatsGo) {
  ClusterOptions o;
  o.worker_port = 6100;
  EXPECT_EQ(explicit_worker_targets({"a", "b:7000", "a", "::1", "[::1]:7001"}, "", o),
            (Strings{"a:6100", "b:7000", "[::1]:6100", "[::1]:7001"}));
  EXPECT_TRUE(Mentions([&] {
    try {
      explicit_worker_targets({"a", ""}, "", o);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  }(), {"--workers", "empty"}));
}

TEST(NamedWorkers, AServiceNameBecomesOneWorkerPerAddress) {
  ClusterOptions o;
  o.resolve_timeout_s = 7;
  std::string asked;
  double waited = 0;
  auto dns = [&](const std::string& host, double timeout) {
    asked = host;
    waited = timeout;
    return Strings{"10.0.0.7", "10.0.0.9", "10.0.0.8"};
  };
  EXPECT_EQ(explicit_worker_targets({"10.0.0.9:6000"}, "workers.ns.svc:6001", o, dns),
            (Strings{"10.0.0.9:6000", "10.0.0.7:6001", "10.0.0.9:6001", "10.0.0.8:6001"}));
  EXPECT_EQ(asked, "workers.ns.svc");
  EXPECT_EQ(waited, 7) << "DNS may lag at job start: --resolve-timeout applies";
  EXPECT_EQ(explicit_worker_targets({}, "workers", o, dns).front(), "10.0.0.7:6000");
  auto error = [&](const std::string& service) {
    try {
      explicit_worker_targets({}, service, o, dns);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(Mentions(error("workers:http"), {"--worker-service", "not a port"}));
  EXPECT_TRUE(Mentions(error("workers:70000"), {"not a port"}));
  EXPECT_TRUE(Mentions(error(":6000"), {"not a DNS name", "headless Service"}));
  // Escapes, spaces and giant names are not DNS names, and are shown escaped and cut short
  // (issue 51: ESC sequences reached the log raw; a 100 MB entry became an address).
  const std::string esc = error("work\x1b[31mers");
  EXPECT_TRUE(Mentions(esc, {"not a DNS name"}));
  EXPECT_EQ(esc.find('\x1b'), std::string::npos) << esc;
  const std::string giant = error(std::string(100'000, 'a'));
  EXPECT_TRUE(Mentions(giant, {"not a DNS name"}));
  EXPECT_LT(giant.size(), 600u);
}

// --workers entries (and the Python feed's workers=) are addresses or nothing: checked,
// escaped and cut short when named, never dialled as they are.
TEST(NamedWorkers, AWorkersEntryThatIsNotAnAddressIsRefusedByName) {
  ClusterOptions o;
  auto error = [&](const std::string& entry) {
    try {
      explicit_worker_targets({"10.0.0.1:6000", entry}, "", o);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const std::string bad : {"[::1", "cpu 1:6000", "a/b:6000", "cpu-1:0", "cpu-1:65536", "\x1b]0;x\x07:6000"}) {
    const std::string e = error(bad);
    EXPECT_TRUE(Mentions(e, {"--workers", "is not one address"})) << bad << ": " << e;
    EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
  }
  EXPECT_LT(error(std::string(100'000, 'a')).size(), 600u);
  EXPECT_EQ(error("cpu-1"), "");
  EXPECT_EQ(error("[fd00::1]:7000"), "");
}

TEST(NamedWorkers, LocalhostResolvesForReal) {
  EXPECT_EQ(resolve_all("localhost", 1), Strings{"127.0.0.1"});
  EXPECT_EQ(resolve_all("10.1.2.3", 1), Strings{"10.1.2.3"});
}

// ---- Slurm ------------------------------------------------------------------------------

// The recorded job: component 0 (2 tasks, no GPU) on vm-0, component 1 (1 task, 1 GPU) on vm-1.
TEST(Slurm, OneStepOverEveryComponentPlacesEachTaskByItsRank) {
  const Cluster worker = discover_env(recorded("slurm-het-step-task0.env"));
  EXPECT_TRUE(Mentions(worker.source, {"Slurm heterogeneous job 5", "SLURM_HET_SIZE=2"}));
  EXPECT_EQ(worker.platform, Platform::kSlurm);
  ASSERT_EQ(worker.groups.size(), 2u);
  EXPECT_EQ(worker.groups[0].name, "het-group-0");
  EXPECT_EQ(worker.groups[0].hosts, Strings{"vm-0"});
  EXPECT_EQ(worker.groups[1].hosts, Strings{"vm-1"});
  EXPECT_EQ(worker.current_host, "vm-0");
  EXPECT_EQ(worker.current_group, "het-group-0");
  EXPECT_EQ(worker.current_instance_type, "debug") << "the partition";
  EXPECT_TRUE(Mentions(worker.origin.at("current_group"), {"SLURM_PROCID"}));
  EXPECT_EQ(worker.groups[0].gpus_per_host, 0);
  EXPECT_EQ(worker.groups[1].gpus_per_host, -1) << "a task sees its own component's GPUs only";
  const RolePlan wp = resolve_roles(worker, {});
  EXPECT_EQ(wp.role, Role::kWorker);
  EXPECT_EQ(wp.trainer_hosts, Strings{"vm-1"}) << "the only other component trains";

  const Cluster trainer = discover_env(recorded("slurm-het-step-task2.env"));
  EXPECT_EQ(trainer.current_host, "vm-1");
  EXPECT_EQ(trainer.current_group, "het-group-1");
  EXPECT_EQ(trainer.groups[1].gpus_per_host, 1);
  const RolePlan tp = resolve_roles(trainer, {});
  EXPECT_EQ(tp.role, Role::kTrainer);
  EXPECT_EQ(tp.worker_hosts, Strings{"vm-0"});
  EXPECT_TRUE(Mentions(tp.origin.at("trainer_groups"), {"1 GPUs per host"}));
  EXPECT_EQ(describe(trainer, tp, {}, 1)["workers"], nlohmann::json({"vm-0:6000"}));
}

// Jobs that share nodes take their ports from their ids (job 5 here): the same on every
// task of the job, another job's elsewhere; ports given stay.
TEST(Slurm, EachJobTakesItsPortsFromItsIdUnlessGiven) {
  const Cluster worker = discover_env(recorded("slurm-het-step-task0.env"));
  const Cluster trainer = discover_env(recorded("slurm-het-step-task2.env"));
  const std::optional<JobPorts> ports = slurm_job_ports(trainer);
  ASSERT_TRUE(ports);
  EXPECT_EQ(ports->job, "5");
  EXPECT_EQ(ports->worker, kJobPortsFirst + 3 * 5);
  EXPECT_EQ(ports->master, ports->worker + 1);
  const Settings w = with_job_ports({}, worker), t = with_job_ports({}, trainer);
  EXPECT_EQ(w.cluster.worker_port, ports->worker) << "the worker listens where the trainer dials";
  EXPECT_EQ(t.cluster.worker_port, ports->worker);
  EXPECT_EQ(t.trainer.master_port, ports->master);
  EXPECT_EQ(describe(trainer, resolve_roles(trainer, t.cluster), t.cluster, 1)["workers"],
            nlohmann::json({"vm-0:" + std::to_string(ports->worker)}));
  Cluster other = trainer;
  other.details["SLURM_JOB_ID"] = "6";
  EXPECT_NE(slurm_job_ports(other)->worker, ports->worker) << "the next job on the node";
  EXPECT_GE(slurm_job_ports(other)->worker, ports->worker + 3) << "past this job's rendezvous and reports";
  other.details["SLURM_JOB_ID"] = std::to_string(5 + kJobPortSlots);
  EXPECT_EQ(slurm_job_ports(other)->worker, ports->worker) << "ids a span apart share ports";
  other.details["SLURM_JOB_ID"] = "99999999";
  EXPECT_LE(slurm_job_ports(other)->master + 1, 65535);
  // Every job's three ports lie outside Linux's default ephemeral range 32768-60999, and
  // no two slots overlap.
  std::set<int> taken;
  for (int id = 0; id < kJobPortSlots; ++id) {
    other.details["SLURM_JOB_ID"] = std::to_string(id);
    const JobPorts p = *slurm_job_ports(other);
    for (int port : {p.worker, p.master, p.master + 1}) {
      EXPECT_TRUE(port >= kJobPortsFirst && port <= 65535 && (port < 32768 || port > 60999)) << id << ": " << port;
      EXPECT_TRUE(taken.insert(port).second) << id << ": " << port << " twice";
    }
  }
  EXPECT_GT(kJobPortSlots, 5000);
  EXPECT_EQ(ephemeral_clash(*ports, "32768\t60999"), "");
  const std::string clash = ephemeral_clash(*ports, "1024 65535");
  EXPECT_NE(clash.find("Slurm job 5's ports 20015, 20016, 20017 lie in this host's ephemeral port range 1024-65535"),
            std::string::npos)
      << clash;
  EXPECT_NE(clash.find("--worker-port"), std::string::npos);
  EXPECT_EQ(ephemeral_clash(*ports, "garbage"), "");
  Settings given;
  given.cluster.worker_port = 7000;
  given.cluster.worker_port_given = true;
  const Settings kept = with_job_ports(given, trainer);
  EXPECT_EQ(kept.cluster.worker_port, 7000);
  EXPECT_EQ(kept.trainer.master_port, ports->master) << "the port not given is still the job's";
  Cluster sagemaker = trainer;
  sagemaker.details.clear();
  EXPECT_FALSE(slurm_job_ports(sagemaker));
  EXPECT_EQ(with_job_ports({}, sagemaker).cluster.worker_port, 6000);
}

TEST(Slurm, TheBatchScriptAndOneComponentStepsFindTheirComponent) {
  const Cluster batch = discover_env(recorded("slurm-het-batch.env"));
  EXPECT_EQ(batch.current_group, "het-group-0");
  EXPECT_TRUE(Mentions(batch.origin.at("current_group"), {"SLURM_JOB_NODELIST"}));
  const Cluster one = discover_env(recorded("slurm-het-component1.env"));
  EXPECT_EQ(one.current_group, "het-group-1");
  EXPECT_EQ(resolve_roles(one, {}).role, Role::kTrainer);
  const Cluster tagged = discover_env(recorded("slurm-het-tagged-task2.env"));
  EXPECT_EQ(tagged.current_group, "het-group-1");
  EXPECT_EQ(tagged.origin.at("current_group"), "TANDEM_HET_GROUP");
}

TEST(Slurm, AMultiNodeJobAndAnOlderReleasesPackNames) {
  const Cluster gpu = discover_env(recorded("slurm-multinode-het.env"));
  EXPECT_EQ(gpu.hosts, (Strings{"cpu01", "cpu02", "cpu03", "cpu04", "gpu01", "gpu02"}));
  EXPECT_EQ(gpu.current_host, "gpu02");
  EXPECT_EQ(gpu.current_instance_type, "gpu");
  const RolePlan plan = resolve_roles(gpu, {});
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_EQ(plan.host_index, 1);
  EXPECT_EQ(plan.worker_hosts, (Strings{"cpu01", "cpu02", "cpu03", "cpu04"}));
  EXPECT_EQ(describe(gpu, plan, {}, 8)["trainer_ranks"], nlohmann::json({{"first", 8}, {"count", 8}}));

  const Cluster old = discover_env(recorded("slurm-pack-names.env"));
  EXPECT_TRUE(Mentions(old.source, {"SLURM_PACK_SIZE=2"}));
  EXPECT_EQ(old.current_host, "cpu03");
  EXPECT_EQ(old.current_group, "het-group-0");
  EXPECT_EQ(resolve_roles(old, {}).role, Role::kWorker);
}

TEST(Slurm, AJobThatIsNotHeterogeneousTrainsEverywhere) {
  const Cluster c = discover_env({{"SLURM_JOB_ID", "77"}, {"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURMD_NODENAME", "n2"},
                                  {"SLURM_GPUS_ON_NODE", "4"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.hosts, (Strings{"n1", "n2", "n3"}));
  const RolePlan plan = resolve_roles(c, {});
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_EQ(plan.host_index, 1);
  EXPECT_TRUE(plan.homogeneous);
}

// salloc's shell of a heterogeneous job is on the submit host: one clear error, naming
// the components and how to start tandem on them (it used to say "one local host").
TEST(SlurmErrors, ASallocShellOfAHeterogeneousJobIsNotOneOfItsNodes) {
  EXPECT_TRUE(Mentions(discover_error(recorded("slurm-het-salloc.env")),
                       {"SLURMD_NODENAME", "heterogeneous job 3439 on vm (salloc's)",
                        "het-group-0 (cpu): tandem-cpu0; het-group-1 (gpu): tandem-gpu0",
                        "srun --het-group=0,1 --ntasks-per-node=1 tandem launch"}));
}

// salloc's shell of a one-node job runs on the login host, not on the node: refused (it
// used to take the job's only node for itself and train on the login host), whereas a
// shell on a node of the job (this machine's name in the node list) is that node.
TEST(SlurmErrors, ASallocShellOutsideTheAllocationIsRefused) {
  const Vars salloc = {{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_NODELIST", "gpu-node-17"}, {"SLURM_NODELIST", "gpu-node-17"},
                       {"SLURM_NNODES", "1"}};
  EXPECT_TRUE(Mentions(discover_error(salloc),
                       {"SLURMD_NODENAME", "is not one of job 9's nodes (gpu-node-17)", "salloc",
                        "srun --ntasks-per-node=1 tandem launch"}));
  ClusterOptions o;
  o.current_host = "gpu-node-17";
  EXPECT_THROW(discover(o, [&](const std::string& k) -> std::optional<std::string> {
                 const auto it = salloc.find(k);
                 return it == salloc.end() ? std::nullopt : std::optional<std::string>(it->second);
               }),
               ConfigError)
      << "--current-host cannot make the login host a node";
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  Vars on_node = salloc;
  on_node["SLURM_JOB_NODELIST"] = on_node["SLURM_NODELIST"] = name;
  EXPECT_EQ(discover_env(on_node).current_host, name);
}

TEST(SlurmErrors, EachNamesTheVariableAndTheFix) {
  Vars v = recorded("slurm-het-step-task0.env");
  v["SLURM_LOCALID"] = "1";
  EXPECT_TRUE(Mentions(discover_error(v), {"SLURM_LOCALID", "one task per node", "--ntasks-per-node=1"}));
  v = recorded("slurm-het-step-task0.env");
  v["SLURM_JOB_NODELIST_HET_GROUP_1"] = "vm-[1-";
  EXPECT_TRUE(Mentions(discover_error(v), {"SLURM_JOB_NODELIST_HET_GROUP_1", "not a Slurm host list"}));
  v = recorded("slurm-het-step-task0.env");
  v.erase("SLURM_JOB_NODELIST_HET_GROUP_1");
  v.erase("SLURM_JOB_NODELIST_PACK_GROUP_1");
  EXPECT_TRUE(Mentions(discover_error(v), {"SLURM_JOB_NODELIST_HET_GROUP_1", "not set"}));
  v = recorded("slurm-het-tagged-task2.env");
  v["TANDEM_HET_GROUP"] = "2";
  EXPECT_TRUE(Mentions(discover_error(v), {"TANDEM_HET_GROUP", "2 components"}));
  // Nothing places a task whose node is in no component: the message says how to start it.
  v = recorded("slurm-het-component1.env");
  v["SLURM_JOB_NODELIST"] = "vm-7";
  v["SLURMD_NODENAME"] = "vm-7";
  EXPECT_TRUE(Mentions(discover_error(v), {"TANDEM_HET_GROUP", "srun --het-group=0,1"}));
  // Three components seen from a CPU task: which one trains must be said.
  v = recorded("slurm-het-step-task0.env");
  v["SLURM_HET_SIZE"] = "3";
  v["SLURM_JOB_NODELIST_HET_GROUP_2"] = "vm-2";
  v["SLURM_NTASKS_HET_GROUP_2"] = "1";
  v["SLURM_STEP_NUM_TASKS"] = "4";
  const Cluster three = discover_env(v);
  try {
    resolve_roles(three, {});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Mentions(e.what(), {"ambiguous", "--trainer-group"}));
  }
  ClusterOptions named;
  named.trainer_groups = {"het-group-2"};
  EXPECT_EQ(resolve_roles(three, named).trainer_hosts, Strings{"vm-2"});
}

// ---- Kubernetes JobSet -----------------------------------------------------------------

ClusterOptions trainer_group(const std::string& name) {
  ClusterOptions o;
  o.trainer_groups = {name};
  return o;
}

TEST(JobSet, AWorkerPodKnowsEveryPeerByItsStableName) {
  const Cluster c = discover_env(recorded("jobset-worker.env"));
  EXPECT_EQ(c.current_host, "tandem-demo-workers-1-0.tandem-demo");
  EXPECT_EQ(c.current_group, "workers");
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].name, "trainer");
  EXPECT_EQ(c.groups[0].hosts, Strings{"tandem-demo-trainer-0-0.tandem-demo"});
  EXPECT_EQ(c.groups[1].hosts, (Strings{"tandem-demo-workers-0-0.tandem-demo", "tandem-demo-workers-1-0.tandem-demo"}));
  EXPECT_TRUE(Mentions(c.source, {"JobSet tandem-demo"}));
  EXPECT_EQ(c.platform, Platform::kJobSet);
  EXPECT_EQ(c.origin.at("current_group"), "REPLICATED_JOB_NAME");
  EXPECT_FALSE(c.ranks_started);

  const RolePlan plan = resolve_roles(c, trainer_group("trainer"));
  EXPECT_EQ(plan.role, Role::kWorker);
  EXPECT_EQ(plan.host_index, 1);
  const auto described = describe(c, plan, trainer_group("trainer"), 1);
  EXPECT_EQ(described["worker_address"], "tandem-demo-workers-1-0.tandem-demo:6000");
  EXPECT_EQ(described["details"]["JOBSET_NAME"], "tandem-demo");
}

TEST(JobSet, TheTrainerPodPullsFromEveryWorkerPod) {
  const Cluster c = discover_env(recorded("jobset-trainer.env"));
  const RolePlan plan = resolve_roles(c, trainer_group("trainer"));
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_EQ(describe(c, plan, trainer_group("trainer"), 1)["workers"],
            nlohmann::json({"tandem-demo-workers-0-0.tandem-demo:6000", "tandem-demo-workers-1-0.tandem-demo:6000"}));
  // Pods carry no instance type: which replicated job trains must be said.
  try {
    resolve_roles(c, {});
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Mentions(e.what(), {"--trainer-group"}));
  }
}

TEST(JobSet, PodsPerJobAndASubdomain) {
  Vars vars = recorded("jobset-worker.env");
  vars["TANDEM_JOBSET_GROUPS"] = "workers=2x2,trainer=1";
  vars["JOB_COMPLETION_INDEX"] = "1";
  vars["TANDEM_JOBSET_SUBDOMAIN"] = "net";
  const Cluster c = discover_env(vars);
  EXPECT_EQ(c.current_host, "tandem-demo-workers-1-1.net");
  EXPECT_EQ(c.hosts.size(), 5u);
}

// "workers,trainer": each pod takes the counts from its labels (its replicated job's
// replicas, the JobSet's total), as examples/kubernetes/jobset.yaml passes them in.
Vars names_only(const std::string& fixture, const std::string& mine, const std::string& global_index) {
  Vars v = recorded(fixture);
  v["TANDEM_JOBSET_GROUPS"] = "workers,trainer";
  v["REPLICATED_JOB_REPLICAS"] = mine;
  v["JOBSET_GLOBAL_REPLICAS"] = "3";
  v["JOB_GLOBAL_INDEX"] = global_index;
  return v;
}

TEST(JobSet, NamesAloneTakeTheCountsFromThePodsLabels) {
  const Cluster worker = discover_env(names_only("jobset-worker.env", "2", "1"));
  const Cluster written = discover_env(recorded("jobset-worker.env"));
  EXPECT_EQ(worker.hosts, written.hosts);
  EXPECT_EQ(worker.current_host, written.current_host);
  const Cluster trainer = discover_env(names_only("jobset-trainer.env", "1", "2"));
  EXPECT_EQ(describe(trainer, resolve_roles(trainer, trainer_group("trainer")), trainer_group("trainer"), 1)["workers"],
            nlohmann::json({"tandem-demo-workers-0-0.tandem-demo:6000", "tandem-demo-workers-1-0.tandem-demo:6000"}));
  Vars three = names_only("jobset-worker.env", "2", "1");
  three["TANDEM_JOBSET_GROUPS"] = "workers,trainer=1,eval=2";
  three["JOBSET_GLOBAL_REPLICAS"] = "5";
  EXPECT_EQ(discover_env(three).hosts.size(), 5u);
}

TEST(JobSetErrors, CountsLeftOutNeedTheLabelsAndMustAddUp) {
  Vars v = names_only("jobset-worker.env", "2", "1");
  v.erase("REPLICATED_JOB_REPLICAS");
  EXPECT_TRUE(Mentions(discover_error(v), {"REPLICATED_JOB_REPLICAS", "jobset.sigs.k8s.io/replicatedjob-replicas", "NAME=REPLICAS"}));
  v = names_only("jobset-worker.env", "2", "1");
  v["JOBSET_GLOBAL_REPLICAS"] = "";
  EXPECT_TRUE(Mentions(discover_error(v), {"JOBSET_GLOBAL_REPLICAS", "not set or empty", "global-replicas"}));
  v["JOBSET_GLOBAL_REPLICAS"] = "2";
  EXPECT_TRUE(Mentions(discover_error(v), {"leaves no replicas for trainer"}));
  v = names_only("jobset-worker.env", "2", "1");
  v["TANDEM_JOBSET_GROUPS"] = "workers,trainer,eval";
  EXPECT_TRUE(Mentions(discover_error(v), {"2 replicated jobs", "all but one"}));
  v = names_only("jobset-worker.env", "2", "1");
  v["TANDEM_JOBSET_GROUPS"] = "trainer,workers";
  EXPECT_TRUE(Mentions(discover_error(v), {"JOB_GLOBAL_INDEX", "is 1", "order of the JobSet's spec"}));
  v = names_only("jobset-worker.env", "2", "1");
  v["TANDEM_JOBSET_GROUPS"] = "workers=3,trainer";
  EXPECT_TRUE(Mentions(discover_error(v), {"gives workers 3 replicas", "label says 2"}));
}

TEST(JobSetErrors, EachNamesTheVariableAndTheFix) {
  auto without = [](const std::string& name) {
    Vars v = recorded("jobset-worker.env");
    v.erase(name);
    return v;
  };
  auto with = [](const std::string& name, const std::string& value) {
    Vars v = recorded("jobset-worker.env");
    v[name] = value;
    return v;
  };
  EXPECT_TRUE(Mentions(discover_error(without("JOBSET_NAME")),
                       {"JOBSET_NAME", "downward API", "jobset.sigs.k8s.io/jobset-name"}));
  EXPECT_TRUE(Mentions(discover_error(without("JOB_INDEX")), {"JOB_INDEX", "jobset.sigs.k8s.io/job-index"}));
  EXPECT_TRUE(Mentions(discover_error(with("REPLICATED_JOB_NAME", "loaders")), {"loaders", "does not list"}));
  EXPECT_TRUE(Mentions(discover_error(with("JOB_INDEX", "2")), {"JOB_INDEX", "replicas only 2"}));
  EXPECT_TRUE(Mentions(discover_error(with("JOB_COMPLETION_INDEX", "1")), {"JOB_COMPLETION_INDEX", "REPLICASxPARALLELISM"}));
  EXPECT_TRUE(Mentions(discover_error(with("TANDEM_JOBSET_GROUPS", "workers=two,trainer=1")), {"count", "\"two\""}));
  EXPECT_TRUE(Mentions(discover_error(with("TANDEM_JOBSET_GROUPS", "Workers=2")), {"NAME or NAME=REPLICAS"}));
  EXPECT_TRUE(Mentions(discover_error(with("TANDEM_JOBSET_GROUPS", "workers=2,workers=1")), {"twice"}));
}

}  // namespace
}  // namespace tandem::cluster
