// The pure pieces of `simulate`: its host plan, the SageMaker files it writes for each
// host, ports, CPU pinning and the status table. (Whole simulated clusters: e2e_test.cc.)
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tandem/common/error.h"
#include "tandem/launch/process.h"
#include "tandem/launch/simulate.h"

namespace tandem::launch {
namespace {

namespace fs = std::filesystem;

TEST(Simulate, PlanInterleavesGroupsDataFirst) {
  SimulateOptions opts;
  opts.trainer_hosts = 3;
  opts.worker_hosts = 1;
  const auto hosts = plan_hosts(opts);
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "algo-1");
  EXPECT_EQ(hosts[0].group, "data_group");
  EXPECT_EQ(hosts[0].instance_type, "ml.c5.18xlarge");
  EXPECT_FALSE(hosts[0].trainer);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(hosts[i].name, "algo-" + std::to_string(i + 1));
    EXPECT_EQ(hosts[i].group, "train_group");
    EXPECT_EQ(hosts[i].instance_type, "ml.p4d.24xlarge");
    EXPECT_TRUE(hosts[i].trainer);
  }
}

TEST(Simulate, PlanRejectsBadCountsNamingTheFlag) {
  SimulateOptions opts;
  opts.trainer_hosts = 0;
  try {
    plan_hosts(opts);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--trainer-hosts"), std::string::npos);
  }
  opts.trainer_hosts = 1;
  opts.worker_hosts = -1;
  try {
    plan_hosts(opts);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--worker-hosts"), std::string::npos);
  }
}

TEST(Simulate, ResourceConfigMatchesSageMakerByteForByte) {
  SimulateOptions opts;
  opts.trainer_hosts = 1;
  opts.worker_hosts = 2;
  const auto hosts = plan_hosts(opts);
  EXPECT_EQ(resource_config(hosts, 0).dump(),
            R"({"current_group_name":"data_group","current_host":"algo-1",)"
            R"("current_instance_type":"ml.c5.18xlarge","hosts":["algo-1","algo-2","algo-3"],)"
            R"("instance_groups":[{"instance_group_name":"data_group",)"
            R"("instance_type":"ml.c5.18xlarge","hosts":["algo-3","algo-1"]},)"
            R"({"instance_group_name":"train_group","instance_type":"ml.p4d.24xlarge",)"
            R"("hosts":["algo-2"]}],"network_interface_name":"lo"})");
  const auto trainer = resource_config(hosts, 1);
  EXPECT_EQ(trainer["current_host"], "algo-2");
  EXPECT_EQ(trainer["current_group_name"], "train_group");
  EXPECT_EQ(trainer["current_instance_type"], "ml.p4d.24xlarge");
}

TEST(Simulate, ResourceConfigWithoutWorkersHasOneGroup) {
  SimulateOptions opts;
  opts.trainer_hosts = 2;
  opts.worker_hosts = 0;
  opts.trainer_instance_type = "ml.g5.xlarge";
  const auto config = resource_config(plan_hosts(opts), 1);
  ASSERT_EQ(config["instance_groups"].size(), 1u);
  EXPECT_EQ(config["instance_groups"][0]["instance_group_name"], "train_group");
  EXPECT_EQ(config["instance_groups"][0]["instance_type"], "ml.g5.xlarge");
  EXPECT_EQ(config["instance_groups"][0]["hosts"].dump(), R"(["algo-2","algo-1"])");
}

TEST(Simulate, HyperparametersBecomeStrings) {
  const auto hp = sagemaker_hyperparameters(nlohmann::json::parse(
      R"({"batch-size":64,"lr":0.05,"model":"resnet18","verbose":true,"workers":[1,2],"x":null})"));
  EXPECT_EQ(hp, nlohmann::json::parse(
                    R"({"batch-size":"64","lr":"0.05","model":"resnet18","verbose":"true",)"
                    R"("workers":"[1,2]","x":"null"})"));
  EXPECT_EQ(sagemaker_hyperparameters(nullptr), nlohmann::json::object());
  EXPECT_THROW(sagemaker_hyperparameters(nlohmann::json::array()), ConfigError);
}

TEST(Simulate, HostMapListsEveryHostOnLoopback) {
  SimulateOptions opts;
  opts.worker_hosts = 1;
  EXPECT_EQ(host_map(plan_hosts(opts), {5001, 5002}),
            "algo-1=127.0.0.1:5001,algo-2=127.0.0.1:5002");
  EXPECT_THROW(host_map(plan_hosts(opts), {5001}), std::invalid_argument);
}

TEST(Simulate, FreePortsAreDistinct) {
  const auto ports = free_loopback_ports(8);
  ASSERT_EQ(ports.size(), 8u);
  for (int p : ports) EXPECT_GT(p, 0);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 8u);
}

TEST(Simulate, HostCpusWrapAroundTheMachine) {
  EXPECT_EQ(host_cpus(0, 2, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(host_cpus(1, 2, 4), (std::vector<int>{2, 3}));
  EXPECT_EQ(host_cpus(2, 2, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(host_cpus(1, 3, 4), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(host_cpus(0, 4, 2), (std::vector<int>{0, 1}));
  EXPECT_TRUE(host_cpus(3, 0, 4).empty());
}

TEST(Simulate, WritesAHostRoot) {
  std::string tmpl = (fs::temp_directory_path() / "tandem-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path root = fs::path(tmpl) / "algo-2";
  SimulateOptions opts;
  const auto hosts = plan_hosts(opts);
  fs::create_directories(root / "output/data");
  std::ofstream(root / "output/data/summary.json") << "{\"stale\":true}";
  std::ofstream(root / "output/failure") << "old failure";

  const auto hp = sagemaker_hyperparameters({{"steps", 10}});
  write_host_root(root.string(), hosts, 1, hp);

  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(read(root / "input/config/resourceconfig.json"), resource_config(hosts, 1).dump());
  EXPECT_EQ(read(root / "input/config/hyperparameters.json"), R"({"steps":"10"})");
  for (const char* dir : {"output", "model", "checkpoints"}) {
    EXPECT_TRUE(fs::is_directory(root / dir)) << dir;
  }
  EXPECT_FALSE(fs::exists(root / "output/data/summary.json"));
  EXPECT_FALSE(fs::exists(root / "output/failure"));
  fs::remove_all(tmpl);
}

TEST(Simulate, StatusTable) {
  SimulateOptions opts;
  opts.worker_hosts = 1;
  const auto hosts = plan_hosts(opts);
  ExitStatus worker{"algo-1", 0, SIGTERM};
  ExitStatus trainer{"algo-2", 0, 0};
  EXPECT_EQ(status_table(hosts, {worker, trainer}),
            "host    role     status\n"
            "algo-1  worker   killed by SIGTERM\n"
            "algo-2  trainer  exited 0\n");
}

}  // namespace
}  // namespace tandem::launch
