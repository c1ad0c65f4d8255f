// Cluster discovery from the environment: the SageMaker toolkit's SM_* variables,
// torchrun's, the local default, --current-host and Slurm's host lists.
#include <cstdlib>

#include "discovery_helpers.h"
#include "tandem/cli/options.h"
#include "tandem/cluster/slurm.h"

namespace tandem::cluster {
namespace {

using namespace testing;

// ---- SageMaker toolkit variables ----------------------------------------------------

const std::map<std::string, std::string> kSageMakerEnv = {
    {"SM_CURRENT_HOST", "algo-2"},
    {"SM_HOSTS", R"(["algo-1","algo-2","algo-3"])"},
    {"SM_CURRENT_INSTANCE_GROUP", "dnn_group"},
    {"SM_CURRENT_INSTANCE_TYPE", "ml.p4d.24xlarge"},
    {"SM_INSTANCE_GROUPS", R"(["data_group","dnn_group"])"},
    {"SM_INSTANCE_GROUPS_DICT",
     R"({"data_group": {"instance_group_name": "data_group", "instance_type": "ml.c5.18xlarge",
                        "hosts": ["algo-3", "algo-1"]},
         "dnn_group": {"instance_group_name": "dnn_group", "instance_type": "ml.p4d.24xlarge",
                       "hosts": ["algo-2"]}})"},
    {"SM_NETWORK_INTERFACE_NAME", "eth0"}};

Cluster discover_env(const std::map<std::string, std::string>& vars) {
  TempRoot root;  // no resourceconfig.json in it
  return discover(root.options(), env_of(vars));
}

TEST(SageMakerEnv, Heterogeneous) {
  Cluster c = discover_env(kSageMakerEnv);
  EXPECT_EQ(c.current_host, "algo-2");
  EXPECT_EQ(c.current_group, "dnn_group");
  EXPECT_EQ(c.current_instance_type, "ml.p4d.24xlarge");
  EXPECT_EQ(c.hosts, (Strings{"algo-1", "algo-2", "algo-3"}));
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].hosts, (Strings{"algo-1", "algo-3"}));
  EXPECT_EQ(c.network_interface, "eth0");
  EXPECT_EQ(c.origin["current_host"], "SM_CURRENT_HOST");
  EXPECT_EQ(c.origin["hosts"], "SM_HOSTS");
  EXPECT_EQ(c.origin["groups"], "SM_INSTANCE_GROUPS_DICT");
  EXPECT_EQ(c.origin["current_group"], "SM_CURRENT_INSTANCE_GROUP");
  EXPECT_EQ(c.origin["current_instance_type"], "SM_CURRENT_INSTANCE_TYPE");
  EXPECT_TRUE(Mentions(c.source, {"SM_"}));
  EXPECT_EQ(c.platform, Platform::kSageMaker);  // what --stop-grace's default reads
}

TEST(SageMakerEnv, OnlyHostsMeansHomogeneous) {
  Cluster c = discover_env({{"SM_CURRENT_HOST", "algo-1"}, {"SM_HOSTS", R"(["algo-2","algo-1"])"}});
  EXPECT_EQ(c.current_host, "algo-1");
  EXPECT_EQ(c.current_group, "homogeneousCluster");
  EXPECT_EQ(c.current_instance_type, "unknown");
  EXPECT_EQ(c.hosts, (Strings{"algo-1", "algo-2"}));
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].hosts, (Strings{"algo-1", "algo-2"}));
  EXPECT_EQ(c.origin["current_group"], "default");
}

TEST(SageMakerEnv, HomogeneousWithGroupAndType) {
  Cluster c = discover_env({{"SM_CURRENT_HOST", "algo-1"},
                            {"SM_HOSTS", R"(["algo-1"])"},
                            {"SM_CURRENT_INSTANCE_GROUP", "homogeneousCluster"},
                            {"SM_INSTANCE_GROUPS", R"(["homogeneousCluster"])"},
                            {"SM_CURRENT_INSTANCE_TYPE", "ml.g5.xlarge"}});
  EXPECT_EQ(c.current_group, "homogeneousCluster");
  EXPECT_EQ(c.current_instance_type, "ml.g5.xlarge");
  EXPECT_EQ(c.origin["current_instance_type"], "SM_CURRENT_INSTANCE_TYPE");
}

TEST(SageMakerEnvErrors, HalfSet) {
  EXPECT_TRUE(Mentions(discover_error({{"SM_CURRENT_HOST", "algo-1"}}), {"SM_HOSTS", "not set"}));
  EXPECT_TRUE(Mentions(discover_error({{"SM_HOSTS", R"(["algo-1"])"}}),
                       {"SM_CURRENT_HOST", "not set"}));
}

TEST(SageMakerEnvErrors, HostsNotJson) {
  EXPECT_TRUE(Mentions(discover_error({{"SM_CURRENT_HOST", "algo-1"}, {"SM_HOSTS", "algo-1,algo-2"}}),
                       {"SM_HOSTS", "not valid JSON", "column"}));
  EXPECT_TRUE(Mentions(discover_error({{"SM_CURRENT_HOST", "algo-1"}, {"SM_HOSTS", R"("algo-1")"}}),
                       {"SM_HOSTS", "list"}));
}

TEST(SageMakerEnvErrors, BadGroupsDict) {
  auto vars = kSageMakerEnv;
  vars["SM_INSTANCE_GROUPS_DICT"] = R"(["data_group"])";
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_INSTANCE_GROUPS_DICT", "object"}));

  vars["SM_INSTANCE_GROUPS_DICT"] = R"({"data_group": {"instance_type": "ml.c5.18xlarge"}})";
  EXPECT_TRUE(Mentions(discover_error(vars),
                       {"SM_INSTANCE_GROUPS_DICT", "\"data_group\"", "\"hosts\"", "missing"}));

  vars["SM_INSTANCE_GROUPS_DICT"] = R"({"data_group": {"instance_group_name": "x",
      "instance_type": "ml.c5.18xlarge", "hosts": ["algo-1"]}})";
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_INSTANCE_GROUPS_DICT", "instance_group_name", "key"}));

  vars["SM_INSTANCE_GROUPS_DICT"] = "{";
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_INSTANCE_GROUPS_DICT", "not valid JSON"}));
}

TEST(SageMakerEnvErrors, GroupListDisagreesWithDict) {
  auto vars = kSageMakerEnv;
  vars["SM_INSTANCE_GROUPS"] = R"(["data_group","gpu_group"])";
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_INSTANCE_GROUPS", "gpu_group", "dnn_group"}));

  vars.erase("SM_INSTANCE_GROUPS_DICT");
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_INSTANCE_GROUPS_DICT", "not set"}));
}

TEST(SageMakerEnvErrors, InconsistentCurrentHostOrGroup) {
  auto vars = kSageMakerEnv;
  vars["SM_CURRENT_INSTANCE_GROUP"] = "gpu_group";
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_CURRENT_INSTANCE_GROUP", "gpu_group"}));

  vars = kSageMakerEnv;
  vars["SM_CURRENT_HOST"] = "algo-7";
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_CURRENT_HOST", "algo-7", "no instance group"}));

  vars = kSageMakerEnv;
  vars["SM_HOSTS"] = R"(["algo-1","algo-2","algo-3","algo-4"])";
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_HOSTS", "algo-4", "no instance group"}));

  vars = kSageMakerEnv;
  vars["SM_CURRENT_INSTANCE_TYPE"] = "ml.c5.18xlarge";
  EXPECT_TRUE(Mentions(discover_error(vars), {"SM_CURRENT_INSTANCE_TYPE", "ml.p4d.24xlarge"}));
}

// ---- torchrun variables -------------------------------------------------------------

TEST(TorchrunEnv, NodesFromWorldSize) {
  Cluster c = discover_env({{"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"},
                            {"RANK", "5"}, {"MASTER_ADDR", "10.0.0.1"}});
  EXPECT_EQ(c.hosts, (Strings{"node-0", "node-1"}));
  EXPECT_EQ(c.current_host, "node-1");
  EXPECT_EQ(c.current_group, "homogeneousCluster");
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.origin["current_host"], "GROUP_RANK");
  EXPECT_TRUE(Mentions(c.origin["hosts"], {"WORLD_SIZE", "index only", "MASTER_ADDR"}));
  EXPECT_EQ(c.details["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(c.details["RANK"], "5");
  EXPECT_TRUE(c.ranks_started);  // launch trains as this rank, starting no processes
  EXPECT_EQ(c.platform, Platform::kTorchrun);
}

// Kubeflow's PyTorchJob: WORLD_SIZE and RANK per pod, no LOCAL_WORLD_SIZE (used to be an
// error): one process per pod.
TEST(TorchrunEnv, KubeflowPodsWithoutLocalWorldSizeAreOneProcessEach) {
  Cluster c = discover_env({{"WORLD_SIZE", "3"}, {"RANK", "2"}, {"MASTER_ADDR", "job-master-0"}});
  EXPECT_EQ(c.hosts, (Strings{"node-0", "node-1", "node-2"}));
  EXPECT_EQ(c.current_host, "node-2");
  EXPECT_EQ(c.origin["current_host"], "RANK");
  EXPECT_TRUE(Mentions(c.source, {"Kubeflow", "one process per node"}));
  EXPECT_TRUE(Mentions(c.origin["hosts"], {"one process per node", "MASTER_ADDR"}));
  EXPECT_EQ(c.details["MASTER_ADDR"], "job-master-0");
  EXPECT_TRUE(c.ranks_started);
}

TEST(TorchrunEnv, NamesSortInNodeOrder) {
  Cluster c = discover_env({{"WORLD_SIZE", "12"}, {"LOCAL_WORLD_SIZE", "1"}, {"GROUP_RANK", "10"}});
  ASSERT_EQ(c.hosts.size(), 12u);
  EXPECT_EQ(c.hosts.front(), "node-00");
  EXPECT_EQ(c.hosts[10], "node-10");
  EXPECT_EQ(c.current_host, "node-10");
}

TEST(TorchrunEnv, RankFallbackAndSingleNode) {
  EXPECT_EQ(discover_env({{"WORLD_SIZE", "6"}, {"LOCAL_WORLD_SIZE", "2"}, {"RANK", "5"}}).current_host,
            "node-2");
  Cluster single = discover_env({{"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "4"}});
  EXPECT_EQ(single.hosts, Strings{"node-0"});
  EXPECT_EQ(single.origin["current_host"], "default");
}

TEST(TorchrunEnvErrors, BadVariables) {
  EXPECT_TRUE(Mentions(discover_error({{"WORLD_SIZE", "eight"}, {"LOCAL_WORLD_SIZE", "4"}}),
                       {"WORLD_SIZE", "eight", "integer"}));
  EXPECT_TRUE(Mentions(discover_error({{"WORLD_SIZE", "8"}}), {"GROUP_RANK", "not set", "8 nodes"}));
  EXPECT_TRUE(Mentions(discover_error({{"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "0"}}),
                       {"LOCAL_WORLD_SIZE", ">= 1"}));
  EXPECT_TRUE(Mentions(discover_error({{"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "3"}}),
                       {"WORLD_SIZE", "multiple of LOCAL_WORLD_SIZE"}));
  EXPECT_TRUE(Mentions(discover_error({{"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}}),
                       {"GROUP_RANK", "not set", "0..1"}));
  EXPECT_TRUE(Mentions(
      discover_error({{"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "2"}}),
      {"GROUP_RANK", "index 2", "2 nodes"}));
}

// ---- Local default, --current-host, process env -------------------------------------

TEST(Discover, LocalDefault) {
  Cluster c = discover_env({});
  EXPECT_EQ(c.current_host, "localhost");
  EXPECT_EQ(c.current_group, "local");
  EXPECT_EQ(c.current_instance_type, "local");
  EXPECT_EQ(c.hosts, Strings{"localhost"});
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.origin["current_host"], "default");
  EXPECT_TRUE(Mentions(c.source, {"default"}));
  EXPECT_EQ(c.platform, Platform::kLocal);
}

TEST(Discover, EmptyVariablesCountAsUnset) {
  EXPECT_EQ(discover_env({{"SM_CURRENT_HOST", ""}, {"WORLD_SIZE", ""}}).current_host, "localhost");
}

TEST(Discover, CurrentHostFlagOverrides) {
  TempRoot root;
  root.write_config(fixture("heterogeneous.json"));
  ClusterOptions opts = root.options();
  opts.current_host = "algo-2";
  Cluster c = discover(opts, kNoEnv);
  EXPECT_EQ(c.current_host, "algo-2");
  EXPECT_EQ(c.current_group, "dnn_group");
  EXPECT_EQ(c.current_instance_type, "ml.p4d.24xlarge");
  EXPECT_EQ(c.origin["current_host"], "--current-host");
  EXPECT_EQ(c.origin["current_group"], "--current-host");
  EXPECT_EQ(c.origin["hosts"], root.config_path());
}

TEST(Discover, CurrentHostFlagMustBeAHost) {
  TempRoot root;
  root.write_config(fixture("heterogeneous.json"));
  ClusterOptions opts = root.options();
  opts.current_host = "algo-9";
  EXPECT_TRUE(Mentions(config_error([&] { discover(opts, kNoEnv); }),
                       {"--current-host algo-9", "algo-1, algo-2, algo-3", root.config_path()}));
}

TEST(Discover, CurrentHostFlagWithLocalDefault) {
  ClusterOptions opts;
  opts.sagemaker_root = "";
  opts.current_host = "localhost";
  EXPECT_EQ(discover(opts, kNoEnv).origin["current_host"], "--current-host");
}

TEST(ProcessEnv, ReadsTheRealEnvironment) {
  ::setenv("TANDEM_CLUSTER_TEST_VAR", "value-1", 1);
  EXPECT_EQ(process_env("TANDEM_CLUSTER_TEST_VAR"), std::optional<std::string>("value-1"));
  ::unsetenv("TANDEM_CLUSTER_TEST_VAR");
  EXPECT_EQ(process_env("TANDEM_CLUSTER_TEST_VAR"), std::nullopt);
}

}  // namespace
}  // namespace tandem::cluster

namespace tandem::cluster {
namespace {

TEST(SlurmHostlist, ExpandsRangesPaddingAndProducts) {
  using Strings = std::vector<std::string>;
  EXPECT_EQ(expand_hostlist("node[01-04,07],gpu-a[1-2]x,login", "SLURM_JOB_NODELIST"),
            (Strings{"node01", "node02", "node03", "node04", "node07", "gpu-a1x", "gpu-a2x", "login"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[8-10]", "x"), (Strings{"r1n8", "r1n9", "r1n10", "r2n8", "r2n9", "r2n10"}));
  EXPECT_EQ(expand_hostlist("cpu7", "x"), Strings{"cpu7"});
  EXPECT_EQ(expand_hostlist("n[098-101]", "x"), (Strings{"n098", "n099", "n100", "n101"}));
  for (const char* bad : {"node[1-4", "node1-4]", "node[4-1]", "node[a-b]", "a,,b", "node[1-200000]"}) {
    try {
      expand_hostlist(bad, "SLURM_JOB_NODELIST_HET_GROUP_1");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("SLURM_JOB_NODELIST_HET_GROUP_1 is not a Slurm host list"),
                std::string::npos) << e.what();
    }
  }
}


// torchrun's rank variables, read once by the rules discovery uses (cluster::read_launcher_env).
TEST(LauncherEnv, TorchrunsVariablesAreReadAndChecked) {
  const LauncherEnv l = read_launcher_env(env_of({{"WORLD_SIZE", "4"}, {"RANK", "3"}, {"LOCAL_RANK", "1"},
                                                  {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "algo-1"},
                                                  {"MASTER_PORT", "29555"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                  {"TORCHELASTIC_RESTART_COUNT", "2"},
                                                  {"TANDEM_GLOO_ADDRESS", "10.0.0.7"}, {"TANDEM_SIMULATED_HOST", "h"}}));
  EXPECT_EQ(l.place.world, 4);
  EXPECT_EQ(l.place.rank, 3);
  EXPECT_EQ(l.place.local_rank, 1);
  EXPECT_EQ(l.place.local_world, 2);
  EXPECT_EQ(l.master_addr, "algo-1");
  EXPECT_EQ(l.master_port, 29555);
  EXPECT_TRUE(l.agent_store);
  EXPECT_EQ(l.restart_count, 2);
  EXPECT_EQ(l.gloo_address, "10.0.0.7");
  EXPECT_TRUE(l.simulated_host);
  const LauncherEnv none = read_launcher_env(env_of({}));
  EXPECT_EQ(none.place.world, 1);
  EXPECT_EQ(none.master_port, 0);
  EXPECT_FALSE(none.agent_store);
  EXPECT_FALSE(none.simulated_host);
}

// A rank of tandem's rank group is told every host's instance type (TANDEM_HOST_TYPES,
// written from the cluster the launcher found): its summary's plan needs no discovery.
TEST(LauncherEnv, TheRankGroupsHostTypesMakeThePlansCluster) {
  const Cluster found = discover_env(kSageMakerEnv);
  EXPECT_EQ(host_types(found), "algo-1=ml.c5.18xlarge,algo-2=ml.p4d.24xlarge,algo-3=ml.c5.18xlarge");
  const LauncherEnv l = read_launcher_env(env_of({{"TANDEM_RANK_GROUP", "1"}, {"TANDEM_HOST", "algo-2"},
                                                  {"TANDEM_HOST_TYPES", host_types(found)}}));
  EXPECT_TRUE(l.rank_group);
  TempRoot root;  // no resourceconfig.json, and no SM_* below: nothing to discover
  const Cluster told = cluster_for_plan(root.options(), l, l.rank_group, kNoEnv);
  EXPECT_EQ(told.current_host, "algo-2");
  EXPECT_EQ(told.current_instance_type, "ml.p4d.24xlarge");
  EXPECT_EQ(told.hosts, (Strings{"algo-1", "algo-2", "algo-3"}));
  ASSERT_EQ(told.groups.size(), 2u);
  EXPECT_EQ(told.groups[0].instance_type, "ml.c5.18xlarge");
  EXPECT_EQ(told.groups[0].hosts, (Strings{"algo-1", "algo-3"}));
  // Not told: discovered, the torchrun variables of a launched rank left out.
  const Cluster discovered = cluster_for_plan(root.options(), LauncherEnv{}, true, env_of(kSageMakerEnv));
  EXPECT_EQ(discovered.current_instance_type, "ml.p4d.24xlarge");
}

TEST(LauncherEnv, BadValuesNameTheVariable) {
  const auto error = [](std::map<std::string, std::string> vars) {
    return config_error([&] { read_launcher_env(env_of(std::move(vars))); });
  };
  EXPECT_NE(error({{"WORLD_SIZE", "4"}, {"RANK", "4"}}).find("environment variable RANK"), std::string::npos);
  EXPECT_NE(error({{"WORLD_SIZE", "4"}, {"RANK", "x"}}).find("\"x\", not an integer"), std::string::npos);
  EXPECT_NE(error({{"WORLD_SIZE", "0"}}).find("WORLD_SIZE"), std::string::npos);
  EXPECT_NE(error({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}, {"WORLD_SIZE", "4"}}).find("LOCAL_RANK"),
            std::string::npos);
  EXPECT_NE(error({{"MASTER_PORT", "70000"}}).find("not a port"), std::string::npos);
  EXPECT_NE(error({{"MASTER_PORT", "-1"}}).find("MASTER_PORT"), std::string::npos);
}


// Only a command that may train as a rank reads torchrun's variables: a stray RANK, or
// the MASTER_PORT=tcp://... Kubernetes injects for a Service named "master", cannot stop
// a data worker.
TEST(LauncherEnv, OnlyRanksReadIt) {
  const EnvLookup odd = env_of({{"RANK", "x"}, {"MASTER_PORT", "tcp://10.0.0.5:29500"}, {"TANDEM_TOKEN", "t0k"}});
  Settings worker;
  EXPECT_NO_THROW(cli::finish_settings(worker, false, odd));
  EXPECT_EQ(worker.launcher.place.world, 1);
  EXPECT_EQ(worker.security.token, "t0k");
  Settings trainer;
  EXPECT_NE(config_error([&] { cli::finish_settings(trainer, true, odd); }).find("environment variable "),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::cluster
