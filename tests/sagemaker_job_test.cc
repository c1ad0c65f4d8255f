// A SageMaker job as simulate runs it (launch/sagemaker_job.h): the hyperparameters in
// both SDK encodings and as the toolkit decodes them and passes them on, the shell's
// hazards, the hosts, torchrun's groups and the SM_* environment.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/launch/sagemaker_job.h"
#include "tandem/launch/simulate.h"

namespace tandem::launch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

SageMakerJob two_groups() {
  SageMakerJob job;
  job.entry_point = "launcher.py";
  job.source_dir = "/code";
  job.groups = {{"data_group", "ml.c5.18xlarge", 2, -1}, {"dnn_group", "ml.p4d.24xlarge", 1, 2}};
  job.hyperparameters = {{"epochs", 3}, {"lr", 0.5}, {"name", "x"}, {"flag", true}, {"sizes", {1, 2}},
                         {"tandem-data-args", {{"size", 64}}}, {"b", 1.0}};
  job.torch_distributed = true;
  job.distribution_groups = {"dnn_group"};
  return job;
}

TEST(SageMakerJob, TheFrameworkEstimatorJsonEncodesEveryValueAndTheToolkitDecodesThem) {
  SageMakerJob job = two_groups();
  const json encoded = encoded_hyperparameters(job);
  EXPECT_EQ(encoded["epochs"], "3");
  EXPECT_EQ(encoded["name"], "\"x\"");
  EXPECT_EQ(encoded["flag"], "true");
  EXPECT_EQ(encoded["sizes"], "[1, 2]") << "json.dumps' separators";
  EXPECT_EQ(encoded["tandem-data-args"], "{\"size\": 64}");
  EXPECT_EQ(encoded["sagemaker_program"], "\"launcher.py\"");
  EXPECT_EQ(encoded["sagemaker_torch_distributed_enabled"], "true");
  const json decoded = decoded_hyperparameters(encoded);
  EXPECT_EQ(decoded["epochs"], 3);
  EXPECT_EQ(decoded["name"], "x");
  EXPECT_EQ(decoded["flag"], true);
  EXPECT_EQ(decoded["tandem-data-args"], json({{"size", 64}}));
}

TEST(SageMakerJob, TheGenericEstimatorSendsPythonsStrAndTheToolkitKeepsWhatIsNotJson) {
  SageMakerJob job = two_groups();
  job.framework = false;
  const json encoded = encoded_hyperparameters(job);
  EXPECT_EQ(encoded["flag"], "True");
  EXPECT_EQ(encoded["sizes"], "[1, 2]");
  EXPECT_EQ(encoded["name"], "x");
  EXPECT_EQ(encoded["b"], "1.0");
  EXPECT_EQ(encoded["tandem-data-args"], "{'size': 64}");
  EXPECT_EQ(encoded["sagemaker_program"], "\"launcher.py\"") << "an entry point's keys are JSON-encoded all the same";
  EXPECT_FALSE(encoded.contains("sagemaker_torch_distributed_enabled")) << "a framework estimator's key";
  const json decoded = decoded_hyperparameters(encoded);
  EXPECT_EQ(decoded["flag"], "True") << "not JSON: kept as the string";
  EXPECT_EQ(decoded["sizes"], json({1, 2}));
  EXPECT_EQ(decoded["tandem-data-args"], "{'size': 64}");
}

TEST(SageMakerJob, TheCommandLineIsSortedAsPythonPrintsItWithoutTheSageMakerKeys) {
  const json decoded = decoded_hyperparameters(encoded_hyperparameters(two_groups()));
  EXPECT_EQ(toolkit_args(decoded),
            (std::vector<std::string>{"-b", "1.0", "--epochs", "3", "--flag", "True", "--lr", "0.5", "--name", "x",
                                      "--sizes", "[1, 2]", "--tandem-data-args", "size=64"}));
  const std::vector<std::string> cmd = toolkit_command({"/usr/bin/python3", "launcher.py"}, decoded);
  ASSERT_EQ(cmd.size(), 3u);
  EXPECT_EQ(cmd[0], "/bin/sh");
  EXPECT_EQ(cmd[2].rfind("exec /usr/bin/python3 launcher.py -b 1.0 --epochs 3", 0), 0u) << cmd[2];
}

TEST(SageMakerJob, ValuesTheToolkitsShellLineWouldBreakAreNamed) {
  EXPECT_NE(shell_unsafe_argument(json{{"sizes", {1, 2}}}).find("'sizes' = '[1, 2]'"), std::string::npos);
  EXPECT_NE(shell_unsafe_argument(json{{"name", "a b"}}).find("a space"), std::string::npos);
  const std::string pipeline = shell_unsafe_argument(json{{"tandem-pipeline", "decode,random_resized_crop(224)"}});
  EXPECT_NE(pipeline.find("'tandem-pipeline' = 'decode,random_resized_crop(224)' ('(' is shell syntax)"),
            std::string::npos) << pipeline;
  EXPECT_NE(shell_unsafe_argument(json{{"x", ""}}).find("empty"), std::string::npos);
  EXPECT_EQ(shell_unsafe_argument(json{{"tandem-data", "python:my_data.py:Flowers"}, {"lr", 0.1},
                                       {"tandem-data-args", {{"size", 64}}}, {"sagemaker_x", "a b"}}),
            "");
}

TEST(SageMakerJob, HostsInterleaveTheGroupsAndGpuFamiliesTrain) {
  const std::vector<SimHost> hosts = job_hosts(two_groups());
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "algo-1");
  EXPECT_EQ(hosts[0].group, "data_group");
  EXPECT_EQ(hosts[1].group, "dnn_group");
  EXPECT_TRUE(hosts[1].trainer);
  EXPECT_EQ(hosts[1].gpus, 2);
  EXPECT_EQ(hosts[2].group, "data_group");
  EXPECT_FALSE(hosts[2].trainer);
  EXPECT_EQ(hosts[2].gpus, 0);
}

TEST(SageMakerJob, TorchrunRunsOnTheNamedGroupsElseOnEveryHostsOwnGroup) {
  SageMakerJob job = two_groups();
  json decoded = decoded_hyperparameters(encoded_hyperparameters(job));
  // The PyTorch estimator passes no groups: each host's toolkit takes its own.
  EXPECT_EQ(distribution_groups(job, decoded, "data_group"), std::vector<std::string>{"data_group"});
  job.hyperparameters["sagemaker_distribution_instance_groups"] = {"dnn_group"};
  decoded = decoded_hyperparameters(encoded_hyperparameters(job));
  EXPECT_EQ(distribution_groups(job, decoded, "data_group"), std::vector<std::string>{"dnn_group"});
  const auto env = torchrun_environment(1, 2, 2, 1, "127.0.0.1", 29500);
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.at("WORLD_SIZE"), "4");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("GROUP_RANK"), "1");
}

TEST(SageMakerJob, EachHostSeesTheToolkitsEnvironmentAndOnlyItsGroupsChannels) {
  const std::string dir = testing::fresh_dir("tandem-sm-job");
  SageMakerJob job = two_groups();
  job.channels = {{"train", dir, "FastFile", {"data_group"}}, {"tandem-token", dir, "File", {"data_group", "dnn_group"}}};
  const std::vector<SimHost> hosts = job_hosts(job);
  const auto env = toolkit_environment(job, hosts, 0, "/r", resource_config(hosts, 0));
  EXPECT_EQ(env.at("SM_HOSTS"), R"(["algo-1","algo-2","algo-3"])");
  EXPECT_EQ(env.at("SM_CURRENT_HOST"), "algo-1");
  EXPECT_EQ(env.at("SM_CURRENT_INSTANCE_GROUP"), "data_group");
  EXPECT_EQ(env.at("SM_CHANNEL_TRAIN"), "/r/input/data/train");
  EXPECT_EQ(env.at("SM_CHANNELS"), R"(["tandem-token","train"])");
  EXPECT_EQ(env.at("SM_MODEL_DIR"), "/r/model");
  EXPECT_EQ(env.at("SM_HP_EPOCHS"), "3");
  EXPECT_EQ(env.at("SM_HP_NAME"), "x");
  EXPECT_EQ(env.at("SM_IS_HETERO"), "true");
  EXPECT_EQ(env.at("SM_NUM_GPUS"), "0");
  EXPECT_EQ(json::parse(env.at("SM_HPS"))["flag"], true);
  EXPECT_FALSE(json::parse(env.at("SM_HPS")).contains("sagemaker_program"));
  EXPECT_EQ(json::parse(env.at("SM_FRAMEWORK_PARAMS"))["sagemaker_torch_distributed_enabled"], true);
  const auto gpu = toolkit_environment(job, hosts, 1, "/g", resource_config(hosts, 1));
  EXPECT_EQ(gpu.count("SM_CHANNEL_TRAIN"), 0u) << "the train channel goes to the data group only";
  EXPECT_EQ(gpu.at("SM_NUM_GPUS"), "2");
  EXPECT_EQ(gpu.at("SM_CURRENT_INSTANCE_GROUP_HOSTS"), R"(["algo-2"])");
  const std::string root = dir + "/algo-2";
  fs::create_directories(root + "/input/config");
  write_toolkit_files(job, hosts, 1, root);
  EXPECT_FALSE(fs::exists(root + "/input/data/train"));
  EXPECT_TRUE(fs::is_directory(root + "/input/data/tandem-token"));
  EXPECT_TRUE(fs::is_directory(root + "/checkpoints"));
}

// The message of the ConfigError reading `text` as a job file throws ("" when none).
std::string job_error(const std::string& text) {
  const std::string dir = testing::fresh_dir("tandem-sm-jobfile");
  std::ofstream(dir + "/job.json") << text;
  try {
    read_sagemaker_job(dir + "/job.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SageMakerJob, JobsSageMakerOrTheSdkRefuseAreRefused) {
  const std::string groups = R"("instance_groups": [{"instance_group_name": "a", "instance_type": "ml.c5.xlarge"},
    {"instance_group_name": "b", "instance_type": "ml.p3.2xlarge"}])";
  EXPECT_NE(job_error("{" + groups + R"(, "distribution": {"torch_distributed": {"enabled": true},
    "instance_groups": ["a", "b"]}})").find("name exactly one"), std::string::npos);
  EXPECT_NE(job_error("{" + groups + R"(, "distribution": {"torch_distributed": {"enabled": true},
    "instance_groups": ["a"]}})").find("GPU instance types only"), std::string::npos);
  EXPECT_NE(job_error("{" + groups + R"(, "inputs": {"x": {"path": "/", "instance_groups": ["a"]}, "y": "/"}})")
                .find("some channels name instance_groups and others do not"), std::string::npos);
  EXPECT_NE(job_error("{" + groups + R"(, "inputs": {"x": {"path": "/", "instance_groups": ["c"]}}})")
                .find("names no group 'c'"), std::string::npos);
  EXPECT_NE(job_error(R"({"instance_groups": [{"instance_group_name": "a", "instance_type": "ml.c5.xlarge"}]})")
                .find("no instance group of a GPU family"), std::string::npos);
  EXPECT_EQ(job_error("{" + groups + R"(, "inputs": {"x": {"path": "/", "instance_groups": ["a", "b"]}}})"), "");
}

}  // namespace
}  // namespace tandem::launch
