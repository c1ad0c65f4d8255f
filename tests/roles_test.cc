// Role resolution, worker endpoints, host resolution and the `tandem inspect` JSON.
#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/roles.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "discovery_helpers.h"
#include "tandem/common/error.h"

namespace tandem::cluster {
namespace {

using namespace testing;
using nlohmann::json;

// A fixture as parse_resource_config reads it, optionally as seen from `current_host`.
Cluster fixture_cluster(const std::string& name, const std::string& current_host = "") {
  const auto path = std::filesystem::path(TANDEM_FIXTURES) / "resourceconfig" / name;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "missing fixture " << path;
  std::ostringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str());
  if (!current_host.empty()) {
    // As SageMaker writes the file on that host: the current fields follow the host.
    doc["current_host"] = current_host;
    doc.erase("current_group_name");
    doc.erase("current_instance_type");
  }
  return parse_resource_config(doc.dump(), path.string());
}

ClusterOptions flags(Strings trainers, Strings workers) {
  ClusterOptions opts;
  opts.trainer_groups = std::move(trainers);
  opts.worker_groups = std::move(workers);
  return opts;
}

std::string roles_error(const Cluster& cluster, const ClusterOptions& opts) {
  return config_error([&] { resolve_roles(cluster, opts); });
}

// ---- GPU families -------------------------------------------------------------------

TEST(InstanceType, GpuFamilies) {
  for (const char* gpu : {"ml.p4d.24xlarge", "ml.p3.2xlarge", "ml.p5.48xlarge", "ml.g5.xlarge",
                          "ml.g4dn.12xlarge", "ml.g6e.2xlarge", "p3.8xlarge"}) {
    EXPECT_TRUE(is_gpu_instance_type(gpu)) << gpu;
  }
  for (const char* cpu : {"ml.c5.18xlarge", "ml.m5.xlarge", "ml.r5.large", "ml.m6g.large",
                          "ml.trn1.32xlarge", "local", "unknown", "", "ml.", "ml.p"}) {
    EXPECT_FALSE(is_gpu_instance_type(cpu)) << cpu;
  }
}

TEST(RoleName, Names) {
  EXPECT_STREQ(role_name(Role::kTrainer), "trainer");
  EXPECT_STREQ(role_name(Role::kWorker), "worker");
}

// ---- The heterogeneous example, on every host ---------------------------------------

TEST(ResolveRoles, HeterogeneousOnAlgo1) {
  RolePlan plan = resolve_roles(fixture_cluster("heterogeneous.json", "algo-1"), {});
  EXPECT_EQ(plan.role, Role::kWorker);
  EXPECT_EQ(plan.trainer_groups, Strings{"dnn_group"});
  EXPECT_EQ(plan.worker_groups, Strings{"data_group"});
  EXPECT_EQ(plan.trainer_hosts, Strings{"algo-2"});
  EXPECT_EQ(plan.worker_hosts, (Strings{"algo-1", "algo-3"}));
  EXPECT_EQ(plan.host_index, 0);
  EXPECT_FALSE(plan.homogeneous);
  EXPECT_TRUE(Mentions(plan.origin["trainer_groups"], {"ml.p4d.24xlarge is a GPU instance family"}));
  EXPECT_TRUE(Mentions(plan.origin["worker_groups"], {"ml.c5.18xlarge is not a GPU instance family"}));
  EXPECT_TRUE(Mentions(plan.origin["role"], {"algo-1", "data_group", "worker"}));
}

TEST(ResolveRoles, HeterogeneousOnAlgo2) {
  RolePlan plan = resolve_roles(fixture_cluster("heterogeneous.json", "algo-2"), {});
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_EQ(plan.trainer_hosts, Strings{"algo-2"});
  EXPECT_EQ(plan.worker_hosts, (Strings{"algo-1", "algo-3"}));
  EXPECT_EQ(plan.host_index, 0);
  EXPECT_FALSE(plan.homogeneous);
}

TEST(ResolveRoles, HeterogeneousOnAlgo3) {
  RolePlan plan = resolve_roles(fixture_cluster("heterogeneous.json", "algo-3"), {});
  EXPECT_EQ(plan.role, Role::kWorker);
  EXPECT_EQ(plan.worker_hosts, (Strings{"algo-1", "algo-3"}));
  EXPECT_EQ(plan.host_index, 1);
}

TEST(Describe, HeterogeneousTrainer) {
  Cluster cluster = fixture_cluster("heterogeneous.json", "algo-2");
  ClusterOptions opts;
  RolePlan plan = resolve_roles(cluster, opts);
  json out = describe(cluster, plan, opts, 8);
  EXPECT_EQ(out["source"], cluster.source);
  EXPECT_EQ(out["current_host"], "algo-2");
  EXPECT_EQ(out["current_group"], "dnn_group");
  EXPECT_EQ(out["current_instance_type"], "ml.p4d.24xlarge");
  EXPECT_EQ(out["hosts"], json({"algo-1", "algo-2", "algo-3"}));
  EXPECT_EQ(out["role"], "trainer");
  EXPECT_EQ(out["homogeneous"], false);
  EXPECT_EQ(out["trainer_hosts"], json({"algo-2"}));
  EXPECT_EQ(out["worker_hosts"], json({"algo-1", "algo-3"}));
  EXPECT_EQ(out["trainer_ranks"], json({{"first", 0}, {"count", 8}}));
  EXPECT_EQ(out["workers"], json({"algo-1:6000", "algo-3:6000"}));
  EXPECT_FALSE(out.contains("worker_address"));
  ASSERT_EQ(out["groups"].size(), 2u);
  EXPECT_EQ(out["groups"][0], json({{"name", "data_group"},
                                    {"instance_type", "ml.c5.18xlarge"},
                                    {"hosts", {"algo-1", "algo-3"}},
                                    {"role", "worker"}}));
  EXPECT_EQ(out["groups"][1]["role"], "trainer");
  EXPECT_EQ(out["origin"]["current_host"], cluster.source);
  EXPECT_TRUE(out["origin"].contains("role"));
  EXPECT_TRUE(out["origin"].contains("trainer_groups"));
  EXPECT_TRUE(out["origin"].contains("worker_groups"));
}

TEST(Describe, HeterogeneousWorkers) {
  for (const auto& [host, index] : {std::pair<std::string, int>{"algo-1", 0}, {"algo-3", 1}}) {
    Cluster cluster = fixture_cluster("heterogeneous.json", host);
    ClusterOptions opts;
    RolePlan plan = resolve_roles(cluster, opts);
    json out = describe(cluster, plan, opts, 8);
    EXPECT_EQ(out["role"], "worker");
    EXPECT_EQ(out["current_group"], "data_group");
    EXPECT_EQ(out["host_index"], index);
    EXPECT_EQ(out["worker_address"], host + ":6000");
    EXPECT_FALSE(out.contains("trainer_ranks"));
    EXPECT_FALSE(out.contains("workers"));
  }
}

TEST(Describe, HostMapRewritesWorkerTargets) {
  Cluster cluster = fixture_cluster("heterogeneous.json", "algo-2");
  ClusterOptions opts;
  opts.host_map = {"algo-1=127.0.0.1:7001", "algo-3=127.0.0.1:7003"};
  json out = describe(cluster, resolve_roles(cluster, opts), opts, 1);
  EXPECT_EQ(out["workers"], json({"127.0.0.1:7001", "127.0.0.1:7003"}));
}

// ---- Homogeneous clusters -----------------------------------------------------------

TEST(ResolveRoles, HomogeneousTrainsEverywhere) {
  // ml.c5 is no GPU family: a single group trains whatever its type.
  Cluster cluster = fixture_cluster("homogeneous.json");
  RolePlan plan = resolve_roles(cluster, {});
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_TRUE(plan.homogeneous);
  EXPECT_EQ(plan.trainer_hosts, (Strings{"algo-1", "algo-2", "algo-3"}));
  EXPECT_TRUE(plan.worker_hosts.empty());
  EXPECT_TRUE(plan.worker_groups.empty());
  EXPECT_EQ(plan.host_index, 1);
  EXPECT_TRUE(Mentions(plan.origin["trainer_groups"], {"only instance group"}));

  json out = describe(cluster, plan, {}, 4);
  EXPECT_EQ(out["homogeneous"], true);
  EXPECT_EQ(out["trainer_ranks"], json({{"first", 4}, {"count", 4}}));
  EXPECT_EQ(out["workers"], json::array());
  EXPECT_EQ(out["groups"][0]["role"], "trainer");
}

TEST(ResolveRoles, HomogeneousWithoutInstanceGroups) {
  RolePlan plan = resolve_roles(fixture_cluster("homogeneous_no_groups.json"), {});
  EXPECT_TRUE(plan.homogeneous);
  EXPECT_EQ(plan.trainer_groups, Strings{"homogeneousCluster"});
  EXPECT_EQ(plan.host_index, 1);
}

TEST(ResolveRoles, SingleGroupFlags) {
  Cluster cluster = fixture_cluster("homogeneous.json");
  EXPECT_TRUE(resolve_roles(cluster, flags({"homogeneousCluster"}, {})).homogeneous);
  EXPECT_TRUE(Mentions(roles_error(cluster, flags({}, {"homogeneousCluster"})),
                       {"--worker-group", "no group trains", "--trainer-group"}));
}

TEST(ResolveRoles, EveryGroupGpuMeansHomogeneous) {
  Cluster cluster = fixture_cluster("heterogeneous.json", "algo-1");
  cluster.groups[0].instance_type = "ml.g5.xlarge";
  RolePlan plan = resolve_roles(cluster, {});
  EXPECT_TRUE(plan.homogeneous);
  EXPECT_EQ(plan.trainer_hosts, (Strings{"algo-1", "algo-2", "algo-3"}));
  EXPECT_EQ(plan.host_index, 0);
}

// ---- Flags --------------------------------------------------------------------------

TEST(ResolveRoles, ThreeGroupsByDefault) {
  RolePlan plan = resolve_roles(fixture_cluster("three_groups.json"), {});
  EXPECT_EQ(plan.trainer_groups, Strings{"dnn_group"});
  EXPECT_EQ(plan.worker_groups, (Strings{"data_group", "prep_group"}));
  EXPECT_EQ(plan.worker_hosts, (Strings{"algo-1", "algo-3", "algo-4"}));
  EXPECT_EQ(plan.role, Role::kWorker);
  EXPECT_EQ(plan.host_index, 1);
  EXPECT_TRUE(Mentions(plan.origin["trainer_groups"], {"ml.g5.48xlarge is a GPU instance family"}));
}

TEST(ResolveRoles, OnlyTrainerGroupFlag) {
  RolePlan plan = resolve_roles(fixture_cluster("three_groups.json"), flags({"prep_group"}, {}));
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_EQ(plan.trainer_groups, Strings{"prep_group"});
  EXPECT_EQ(plan.worker_groups, (Strings{"data_group", "dnn_group"}));
  EXPECT_EQ(plan.worker_hosts, (Strings{"algo-1", "algo-2", "algo-4"}));
  EXPECT_EQ(plan.host_index, 0);
  EXPECT_TRUE(Mentions(plan.origin["trainer_groups"], {"prep_group: --trainer-group"}));
  EXPECT_TRUE(Mentions(plan.origin["worker_groups"], {"not named by --trainer-group"}));
}

TEST(ResolveRoles, OnlyWorkerGroupFlag) {
  RolePlan plan = resolve_roles(fixture_cluster("three_groups.json"), flags({}, {"data_group"}));
  EXPECT_EQ(plan.trainer_groups, (Strings{"dnn_group", "prep_group"}));
  EXPECT_EQ(plan.trainer_hosts, (Strings{"algo-2", "algo-3"}));
  EXPECT_EQ(plan.worker_hosts, (Strings{"algo-1", "algo-4"}));
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_EQ(plan.host_index, 1);
  EXPECT_TRUE(Mentions(plan.origin["worker_groups"], {"data_group: --worker-group"}));
  EXPECT_TRUE(Mentions(plan.origin["trainer_groups"], {"not named by --worker-group"}));
}

TEST(ResolveRoles, BothFlagsAndRepeats) {
  RolePlan plan = resolve_roles(fixture_cluster("three_groups.json"),
                                flags({"dnn_group", "dnn_group"}, {"prep_group", "data_group"}));
  EXPECT_EQ(plan.trainer_groups, Strings{"dnn_group"});
  EXPECT_EQ(plan.worker_groups, (Strings{"data_group", "prep_group"}));
}

TEST(ResolveRoles, FlagsOverrideGpuDefault) {
  // The CPU group trains and the GPU group serves data, because the flags say so.
  RolePlan plan =
      resolve_roles(fixture_cluster("heterogeneous.json", "algo-1"), flags({"data_group"}, {}));
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_EQ(plan.worker_hosts, Strings{"algo-2"});
}

TEST(ResolveRoles, CpuOnlyWithTrainerGroup) {
  RolePlan plan = resolve_roles(fixture_cluster("cpu_only.json"), flags({"data_group"}, {}));
  EXPECT_EQ(plan.role, Role::kTrainer);
  EXPECT_EQ(plan.worker_groups, Strings{"big_cpu_group"});
}

// ---- Role errors --------------------------------------------------------------------

TEST(RoleErrors, NoGpuGroupSuggestsTrainerGroup) {
  Cluster cluster = fixture_cluster("cpu_only.json");
  EXPECT_TRUE(Mentions(roles_error(cluster, {}),
                       {cluster.source, "GPU instance family", "data_group (ml.c5.18xlarge)",
                        "big_cpu_group (ml.m5.24xlarge)", "--trainer-group"}));
}

TEST(RoleErrors, UnknownGroupListsKnownOnes) {
  Cluster cluster = fixture_cluster("heterogeneous.json");
  EXPECT_TRUE(Mentions(roles_error(cluster, flags({"gpu_group"}, {})),
                       {"--trainer-group gpu_group", "data_group, dnn_group", cluster.source}));
  EXPECT_TRUE(Mentions(roles_error(cluster, flags({}, {"cpu_group"})),
                       {"--worker-group cpu_group", "data_group, dnn_group"}));
}

TEST(RoleErrors, GroupBothTrainerAndWorker) {
  EXPECT_TRUE(Mentions(roles_error(fixture_cluster("heterogeneous.json"),
                                   flags({"dnn_group"}, {"dnn_group", "data_group"})),
                       {"--trainer-group/--worker-group", "dnn_group", "both"}));
}

TEST(RoleErrors, GroupNamedByNeither) {
  EXPECT_TRUE(Mentions(roles_error(fixture_cluster("three_groups.json"),
                                   flags({"dnn_group"}, {"data_group"})),
                       {"prep_group", "neither", "--worker-group"}));
}

TEST(RoleErrors, NoTrainerGroup) {
  EXPECT_TRUE(Mentions(roles_error(fixture_cluster("heterogeneous.json"),
                                   flags({}, {"data_group", "dnn_group"})),
                       {"--worker-group", "no group trains", "--trainer-group"}));
}

// ---- Endpoints and --host-map -------------------------------------------------------

TEST(WorkerEndpoint, DefaultsToHostAndWorkerPort) {
  ClusterOptions opts;
  opts.worker_port = 6123;
  Endpoint e = worker_endpoint("algo-3", opts);
  EXPECT_EQ(e.host, "algo-3");
  EXPECT_EQ(e.address, "algo-3");
  EXPECT_EQ(e.port, 6123);
  EXPECT_EQ(e.target(), "algo-3:6123");
}

// --workers localhost used to dial gRPC's default port 443.
TEST(WorkerEndpoint, AWorkerTargetWithoutAPortTakesTheWorkerPort) {
  EXPECT_EQ(with_default_port("localhost", 6000), "localhost:6000");
  EXPECT_EQ(with_default_port("10.0.0.5", 6001), "10.0.0.5:6001");
  EXPECT_EQ(with_default_port("algo-2:7000", 6000), "algo-2:7000");
  EXPECT_EQ(with_default_port("::1", 6000), "[::1]:6000");
  EXPECT_EQ(with_default_port("[::1]", 6000), "[::1]:6000");
  EXPECT_EQ(with_default_port("[::1]:7001", 6000), "[::1]:7001");
}

// One worker under several spellings is one identity (issue 51: three spellings were three
// links, three streams and its skipped samples counted three times).
TEST(WorkerEndpoint, SpellingsOfOneWorkerHaveOneIdentity) {
  int lookups = 0;
  const Resolver dns = [&](const std::string& host, double) -> std::vector<std::string> {
    ++lookups;
    if (host == "localhost" || host == "algo-1") return {"127.0.0.1"};
    if (host == "v6-host") return {"fd00::0:1"};
    throw NetworkError("no such host " + host);
  };
  const std::string id = worker_identity("127.0.0.1:6001", dns, 1);
  EXPECT_EQ(id, "127.0.0.1:6001");
  EXPECT_EQ(worker_identity("localhost:6001", dns, 1), id);
  EXPECT_EQ(worker_identity("algo-1:6001", dns, 1), id);
  EXPECT_EQ(worker_identity("[::ffff:127.0.0.1]:6001", dns, 1), id);
  EXPECT_EQ(worker_identity("127.0.0.1:06001", dns, 1), id);
  EXPECT_NE(worker_identity("127.0.0.1:6002", dns, 1), id);
  EXPECT_EQ(worker_identity("[fd00:0::1]:7000", dns, 1), "[fd00::1]:7000");
  EXPECT_EQ(worker_identity("v6-host:7000", dns, 1), "[fd00::1]:7000");
  EXPECT_EQ(lookups, 3);  // numeric addresses are never looked up
  // Known by its spelling: no port, a name that does not resolve, no resolver, not a target.
  EXPECT_EQ(worker_identity("a", dns, 1), "a");
  EXPECT_EQ(worker_identity("gone:6001", dns, 1), "gone:6001");
  EXPECT_EQ(worker_identity("localhost:6001", nullptr, 1), "localhost:6001");
  EXPECT_EQ(worker_identity("[::1:6001", dns, 1), "[::1:6001");
  EXPECT_EQ(worker_identity("host:99999", dns, 1), "host:99999");
}

TEST(WorkerEndpoint, HostMap) {
  ClusterOptions opts;
  opts.host_map = {"algo-1=127.0.0.1:7001", " algo-2 = 10.0.0.2 ", "algo-3=[::1]:7003,algo-4=::1",
                   "algo-5=[fe80::1],", "algo-1=127.0.0.1:7001"};
  EXPECT_EQ(worker_endpoint("algo-1", opts).target(), "127.0.0.1:7001");
  EXPECT_EQ(worker_endpoint("algo-2", opts).target(), "10.0.0.2:6000");
  EXPECT_EQ(worker_endpoint("algo-3", opts).target(), "[::1]:7003");
  EXPECT_EQ(worker_endpoint("algo-4", opts).address, "::1");
  EXPECT_EQ(worker_endpoint("algo-4", opts).target(), "[::1]:6000");
  EXPECT_EQ(worker_endpoint("algo-5", opts).target(), "[fe80::1]:6000");
  Endpoint unmapped = worker_endpoint("algo-9", opts);
  EXPECT_EQ(unmapped.address, "algo-9");
  EXPECT_EQ(unmapped.host, "algo-9");
}

TEST(WorkerEndpoint, MalformedHostMapEntries) {
  for (const char* entry : {"algo-1", "=127.0.0.1", "algo-1=", "algo-1=127.0.0.1:port",
                            "algo-1=127.0.0.1:70000", "algo-1=127.0.0.1:", "algo-1=[::1",
                            "algo-1=[::1]x"}) {
    ClusterOptions opts;
    opts.host_map = {entry};
    EXPECT_TRUE(Mentions(config_error([&] { worker_endpoint("algo-2", opts); }),
                         {"--host-map", std::string("\"") + entry + "\"", "name=addr[:port]"}))
        << entry;
  }
}

TEST(WorkerEndpoint, ConflictingHostMapEntries) {
  ClusterOptions opts;
  opts.host_map = {"algo-1=127.0.0.1:7001", "algo-1=127.0.0.1:7002"};
  EXPECT_TRUE(Mentions(config_error([&] { worker_endpoint("algo-1", opts); }),
                       {"--host-map", "algo-1=127.0.0.1:7002", "already mapped"}));
}

TEST(WorkerEndpoint, BadWorkerPort) {
  ClusterOptions opts;
  opts.worker_port = 0;
  EXPECT_TRUE(Mentions(config_error([&] { worker_endpoint("algo-1", opts); }), {"--worker-port"}));
}

// ---- resolve_host -------------------------------------------------------------------

TEST(ResolveHost, NumericAndLocalhost) {
  EXPECT_EQ(resolve_host("127.0.0.1", 0.5), "127.0.0.1");
  EXPECT_EQ(resolve_host("::1", 0.5), "::1");
  EXPECT_EQ(resolve_host("localhost", 0.5), "127.0.0.1");
}

TEST(ResolveHost, UnresolvableNameFailsAtDeadline) {
  const auto start = std::chrono::steady_clock::now();
  try {
    resolve_host("no-such-host.invalid", 0.5);
    FAIL() << "expected NetworkError";
  } catch (const NetworkError& e) {
    EXPECT_TRUE(Mentions(e.what(), {"no-such-host.invalid", "waiting", "--host-map",
                                    "--resolve-timeout"}));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.4);
  EXPECT_LT(waited, 3.0);
}

}  // namespace
}  // namespace tandem::cluster
