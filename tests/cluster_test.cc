// Cluster discovery: resourceconfig.json, SM_* and torchrun variables, the local default,
// --current-host, and every way a source can be wrong.
#include "tandem/cluster/cluster.h"
#include "tandem/cluster/slurm.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/common/error.h"

namespace tandem::cluster {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Strings = std::vector<std::string>;

const std::string kFakePath = "/fake/input/config/resourceconfig.json";

std::string fixture(const std::string& name) {
  std::ifstream in(fs::path(TANDEM_FIXTURES) / "resourceconfig" / name);
  EXPECT_TRUE(in) << "missing fixture " << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const EnvLookup kNoEnv = env_of({});

// A throwaway SageMaker root: <tmp>/tandem-cluster-test-<pid>-<n>/input/config/.
class TempRoot {
 public:
  TempRoot() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("tandem-cluster-test-" + std::to_string(::getpid()) +
                                         "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_ / "input" / "config");
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;

  void write_config(const std::string& text) const { std::ofstream(config_path()) << text; }
  std::string config_path() const { return (path_ / "input/config/resourceconfig.json").string(); }
  ClusterOptions options() const {
    ClusterOptions opts;
    opts.sagemaker_root = path_.string();
    return opts;
  }

 private:
  fs::path path_;
};

// Runs `f`, which must throw ConfigError, and returns its message.
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ConfigError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ConfigError, nothing was thrown";
  return "";
}

std::string parse_error(const std::string& text) {
  return config_error([&] { parse_resource_config(text, kFakePath); });
}

std::string discover_error(const std::map<std::string, std::string>& vars) {
  return config_error([&] {
    ClusterOptions opts;
    opts.sagemaker_root = "/nonexistent-tandem-root";
    discover(opts, env_of(vars));
  });
}

::testing::AssertionResult Mentions(const std::string& message,
                                    std::initializer_list<std::string> parts) {
  for (const auto& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "\"" << part << "\" not in: " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

// The heterogeneous example as SageMaker writes it on `host`.
std::string heterogeneous_on(const std::string& host) {
  json doc = json::parse(fixture("heterogeneous.json"));
  const bool dnn = host == "algo-2";
  doc["current_host"] = host;
  doc["current_group_name"] = dnn ? "dnn_group" : "data_group";
  doc["current_instance_type"] = dnn ? "ml.p4d.24xlarge" : "ml.c5.18xlarge";
  return doc.dump();
}

json heterogeneous_doc() { return json::parse(fixture("heterogeneous.json")); }

// ---- resourceconfig.json ------------------------------------------------------------

TEST(ParseResourceConfig, HeterogeneousExample) {
  Cluster c = parse_resource_config(fixture("heterogeneous.json"), kFakePath);
  EXPECT_EQ(c.current_host, "algo-1");
  EXPECT_EQ(c.current_group, "data_group");
  EXPECT_EQ(c.current_instance_type, "ml.c5.18xlarge");
  EXPECT_EQ(c.hosts, (Strings{"algo-1", "algo-2", "algo-3"}));
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].name, "data_group");
  EXPECT_EQ(c.groups[0].instance_type, "ml.c5.18xlarge");
  EXPECT_EQ(c.groups[0].hosts, (Strings{"algo-1", "algo-3"}));  // sorted from [algo-3, algo-1]
  EXPECT_EQ(c.groups[1].name, "dnn_group");
  EXPECT_EQ(c.groups[1].instance_type, "ml.p4d.24xlarge");
  EXPECT_EQ(c.groups[1].hosts, Strings{"algo-2"});
  EXPECT_EQ(c.network_interface, "eth0");
  EXPECT_EQ(c.source, kFakePath);
  for (const char* key : {"current_host", "current_group", "current_instance_type", "hosts",
                          "groups", "network_interface"}) {
    EXPECT_EQ(c.origin[key], kFakePath) << key;
  }
}

TEST(Discover, HeterogeneousExampleOnEveryHost) {
  const std::map<std::string, std::pair<std::string, std::string>> expected = {
      {"algo-1", {"data_group", "ml.c5.18xlarge"}},
      {"algo-2", {"dnn_group", "ml.p4d.24xlarge"}},
      {"algo-3", {"data_group", "ml.c5.18xlarge"}}};
  for (const auto& [host, group_and_type] : expected) {
    TempRoot root;
    root.write_config(heterogeneous_on(host));
    Cluster c = discover(root.options(), kNoEnv);
    EXPECT_EQ(c.current_host, host);
    EXPECT_EQ(c.current_group, group_and_type.first) << host;
    EXPECT_EQ(c.current_instance_type, group_and_type.second) << host;
    EXPECT_EQ(c.hosts, (Strings{"algo-1", "algo-2", "algo-3"}));
    EXPECT_EQ(c.source, root.config_path());
    EXPECT_EQ(c.origin["current_host"], root.config_path());
  }
}

TEST(Discover, FileWinsOverEnvironment) {
  TempRoot root;
  root.write_config(fixture("heterogeneous.json"));
  Cluster c = discover(root.options(),
                       env_of({{"SM_CURRENT_HOST", "other"}, {"SM_HOSTS", "[\"other\"]"},
                               {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "4"}}));
  EXPECT_EQ(c.current_host, "algo-1");
  EXPECT_EQ(c.source, root.config_path());
}

TEST(ParseResourceConfig, HomogeneousWithInstanceGroups) {
  Cluster c = parse_resource_config(fixture("homogeneous.json"), kFakePath);
  EXPECT_EQ(c.current_host, "algo-2");
  EXPECT_EQ(c.current_group, "homogeneousCluster");
  EXPECT_EQ(c.current_instance_type, "ml.c5.4xlarge");
  EXPECT_EQ(c.hosts, (Strings{"algo-1", "algo-2", "algo-3"}));
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].hosts, (Strings{"algo-1", "algo-2", "algo-3"}));
}

TEST(ParseResourceConfig, HomogeneousWithoutInstanceGroups) {
  Cluster c = parse_resource_config(fixture("homogeneous_no_groups.json"), kFakePath);
  EXPECT_EQ(c.current_host, "algo-2");
  EXPECT_EQ(c.current_group, "homogeneousCluster");
  EXPECT_EQ(c.current_instance_type, "ml.p3.2xlarge");
  EXPECT_EQ(c.hosts, (Strings{"algo-1", "algo-2"}));
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].name, "homogeneousCluster");
  EXPECT_EQ(c.groups[0].instance_type, "ml.p3.2xlarge");
  EXPECT_EQ(c.groups[0].hosts, (Strings{"algo-1", "algo-2"}));
  EXPECT_EQ(c.origin["current_group"], "default");
  EXPECT_EQ(c.origin["current_instance_type"], kFakePath);
  EXPECT_EQ(c.origin["hosts"], kFakePath);
}

TEST(ParseResourceConfig, OldestFormatHasOnlyHosts) {
  Cluster c = parse_resource_config(
      R"({"current_host":"algo-1","hosts":["algo-1"],"network_interface_name":"eth0"})",
      kFakePath);
  EXPECT_EQ(c.current_group, "homogeneousCluster");
  EXPECT_EQ(c.current_instance_type, "unknown");
  EXPECT_EQ(c.origin["current_instance_type"], "default");
}

TEST(ParseResourceConfig, ExtraKeysAreIgnored) {
  Cluster c = parse_resource_config(fixture("extra_keys.json"), kFakePath);
  EXPECT_EQ(c.current_host, "algo-3");
  EXPECT_EQ(c.current_group, "data_group");
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].name, "data_group");  // sorted by name
  EXPECT_EQ(c.groups[0].hosts, (Strings{"algo-1", "algo-3"}));
  EXPECT_EQ(c.groups[1].name, "dnn_group");
}

TEST(ParseResourceConfig, CurrentGroupIsDerivedWhenAbsent) {
  json doc = heterogeneous_doc();
  doc.erase("current_group_name");
  doc.erase("current_instance_type");
  doc["current_host"] = "algo-2";
  Cluster c = parse_resource_config(doc.dump(), kFakePath);
  EXPECT_EQ(c.current_group, "dnn_group");
  EXPECT_EQ(c.current_instance_type, "ml.p4d.24xlarge");
}

// ---- resourceconfig.json errors -----------------------------------------------------

TEST(ResourceConfigErrors, InvalidJsonNamesFileAndPosition) {
  TempRoot root;
  root.write_config(fixture("invalid.json"));
  const std::string message = config_error([&] { discover(root.options(), kNoEnv); });
  EXPECT_TRUE(Mentions(message, {root.config_path(), "not valid JSON", "line 3"}));
}

TEST(ResourceConfigErrors, InvalidJsonDirect) {
  EXPECT_TRUE(Mentions(parse_error("{\"current_host\": "), {kFakePath, "not valid JSON", "column"}));
  EXPECT_TRUE(Mentions(parse_error(""), {kFakePath, "not valid JSON"}));
}

TEST(ResourceConfigErrors, NotAnObject) {
  EXPECT_TRUE(Mentions(parse_error("[1, 2]"), {kFakePath, "expected a JSON object", "array"}));
}

TEST(ResourceConfigErrors, MissingOrWronglyTypedTopLevelFields) {
  json doc = heterogeneous_doc();
  doc.erase("current_host");
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"current_host\"", "missing"}));

  doc = heterogeneous_doc();
  doc["current_host"] = 7;
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"current_host\"", "expected a string"}));

  doc = heterogeneous_doc();
  doc.erase("hosts");
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"hosts\"", "missing"}));

  doc = heterogeneous_doc();
  doc["hosts"] = "algo-1,algo-2";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"hosts\"", "list", "Fix:"}));

  doc = heterogeneous_doc();
  doc["hosts"] = json::array({"algo-1", 2});
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"hosts\"", "item 1"}));

  doc = heterogeneous_doc();
  doc["current_group_name"] = json::array();
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"current_group_name\"", "string"}));

  doc = heterogeneous_doc();
  doc["network_interface_name"] = 0;
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"network_interface_name\""}));
}

TEST(ResourceConfigErrors, MalformedInstanceGroups) {
  json doc = heterogeneous_doc();
  doc["instance_groups"] = "data_group";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"instance_groups\"", "list"}));

  doc["instance_groups"] = json::array();
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"instance_groups\"", "empty list"}));

  doc = heterogeneous_doc();
  doc["instance_groups"][1] = "dnn_group";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"instance_groups[1]\"", "object"}));

  doc = heterogeneous_doc();
  doc["instance_groups"][1].erase("instance_type");
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"instance_groups[1].instance_type\"", "missing"}));

  doc = heterogeneous_doc();
  doc["instance_groups"][0].erase("instance_group_name");
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"instance_groups[0].instance_group_name\"", "missing"}));

  doc = heterogeneous_doc();
  doc["instance_groups"][0]["hosts"] = json::object();
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"instance_groups[0].hosts\""}));
}

TEST(ResourceConfigErrors, EmptyGroup) {
  json doc = heterogeneous_doc();
  doc["instance_groups"][1]["hosts"] = json::array();
  doc["hosts"] = json::array({"algo-1", "algo-3"});
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"instance_groups[1]\"", "dnn_group has no hosts", "Fix:"}));
}

TEST(ResourceConfigErrors, EmptyGroupNameOrType) {
  json doc = heterogeneous_doc();
  doc["instance_groups"][1]["instance_group_name"] = "";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"instance_groups[1]\"", "empty group name"}));
  doc = heterogeneous_doc();
  doc["instance_groups"][1]["instance_type"] = "";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"instance_groups[1]\"", "empty instance type"}));
}

TEST(ResourceConfigErrors, DuplicateGroupName) {
  json doc = heterogeneous_doc();
  doc["instance_groups"][1]["instance_group_name"] = "data_group";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"instance_groups\"", "data_group twice"}));
}

TEST(ResourceConfigErrors, HostInTwoGroups) {
  json doc = heterogeneous_doc();
  doc["instance_groups"][1]["hosts"] = json::array({"algo-2", "algo-3"});
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"instance_groups\"", "algo-3 is in both data_group and dnn_group",
                        "exactly one"}));
}

TEST(ResourceConfigErrors, CurrentHostInNoGroup) {
  json doc = heterogeneous_doc();
  doc["current_host"] = "algo-9";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"current_host\"", "algo-9 is in no instance group", "dnn_group",
                        "--current-host"}));
}

TEST(ResourceConfigErrors, CurrentGroupNotAmongGroups) {
  json doc = heterogeneous_doc();
  doc["current_group_name"] = "gpu_group";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"current_group_name\"", "gpu_group", "not an instance group",
                        "data_group, dnn_group"}));
}

TEST(ResourceConfigErrors, CurrentGroupDisagreesWithCurrentHost) {
  json doc = heterogeneous_doc();
  doc["current_group_name"] = "dnn_group";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"current_group_name\"", "algo-1 is in data_group"}));
}

TEST(ResourceConfigErrors, CurrentInstanceTypeDisagreesWithGroup) {
  json doc = heterogeneous_doc();
  doc["current_instance_type"] = "ml.p4d.24xlarge";
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"current_instance_type\"", "ml.c5.18xlarge"}));
}

TEST(ResourceConfigErrors, HostInNoGroup) {
  json doc = heterogeneous_doc();
  doc["hosts"].push_back("algo-4");
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"hosts\"", "algo-4, which is in no instance group"}));
}

TEST(ResourceConfigErrors, GroupHostMissingFromHosts) {
  json doc = heterogeneous_doc();
  doc["instance_groups"][1]["hosts"].push_back("algo-5");
  EXPECT_TRUE(Mentions(parse_error(doc.dump()),
                       {kFakePath, "\"hosts\"", "does not list algo-5", "dnn_group"}));
}

TEST(ResourceConfigErrors, DuplicateOrEmptyHosts) {
  json doc = heterogeneous_doc();
  doc["hosts"].push_back("algo-2");
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"hosts\"", "algo-2 twice"}));
  doc["hosts"] = json::array();
  EXPECT_TRUE(Mentions(parse_error(doc.dump()), {kFakePath, "\"hosts\"", "no hosts"}));
}

TEST(ResourceConfigErrors, ConfigPathIsADirectory) {
  TempRoot root;
  fs::create_directories(root.config_path());
  EXPECT_TRUE(Mentions(config_error([&] { discover(root.options(), kNoEnv); }),
                       {root.config_path(), "not a regular file"}));
}

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

}  // namespace
}  // namespace tandem::cluster
