// Cluster discovery from SageMaker's resourceconfig.json: every format, and every way the
// file can be wrong. The environment sources are in discovery_env_test.cc and
// platforms_test.cc.
#include <nlohmann/json.hpp>

#include "discovery_helpers.h"

namespace tandem::cluster {
namespace {

using namespace testing;
using nlohmann::json;

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
    EXPECT_EQ(c.platform, Platform::kSageMaker);
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

}  // namespace
}  // namespace tandem::cluster
