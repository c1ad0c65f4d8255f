// The trainer's start-up checks and what it reports about its Torch, end to end with the
// real binary; and gradient buckets overlapped with backward against the same buckets
// sent after it, with two Gloo ranks.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"

namespace {

namespace fs = std::filesystem;
using namespace tandem::testing;

// A SageMaker root whose only instance group is a GPU family.
fs::path gpu_family_root(const fs::path& dir) {
  fs::create_directories(dir / "root/input/config");
  fs::create_directories(dir / "root/output/data");
  std::ofstream(dir / "root/input/config/resourceconfig.json")
      << R"({"current_group_name":"dnn_group","current_host":"algo-1","current_instance_type":"ml.p4d.24xlarge",)"
      << R"("hosts":["algo-1"],"instance_groups":[{"instance_group_name":"dnn_group",)"
      << R"("instance_type":"ml.p4d.24xlarge","hosts":["algo-1"]}],"network_interface_name":"eth0"})";
  return dir / "root";
}

TEST(GpuCheck, AGpuFamilyHostWithoutAUsableGpuRefusesToTrainUnlessAllowed) {
  if (tandem::training::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU: the check passes";
  const fs::path dir = fresh_dir("gpu-family");
  const fs::path root = gpu_family_root(dir);
  const std::string args = "launch --sagemaker-root " + root.string() + " --host-map algo-1=127.0.0.1" +
                           " --local-workers 1 --train-threads 1 --steps 3 --batch-size 8";
  ASSERT_EQ(run_tandem(args, dir / "refused.log", 60), 3) << slurp(dir / "refused.log");
  const std::string refused = slurp(dir / "refused.log");
  EXPECT_NE(refused.find("ml.p4d.24xlarge (a GPU instance family) but cannot train on a GPU"), std::string::npos)
      << refused;
  EXPECT_NE(refused.find("--allow-cpu-training"), std::string::npos) << refused;
  EXPECT_NE(slurp(root / "output/failure").find("GPU instance family"), std::string::npos);

  ASSERT_EQ(run_tandem(args + " --allow-cpu-training", dir / "allowed.log", 120), 0) << slurp(dir / "allowed.log");
  EXPECT_NE(slurp(dir / "allowed.log").find("trains on the CPU (--allow-cpu-training)"), std::string::npos);
}

TEST(GpuCheck, VersionAndInspectNameTheTorchBuildAndDevices) {
  const fs::path dir = fresh_dir("versions");
  ASSERT_EQ(run_tandem("--version", dir / "version.log", 30), 0);
  const tandem::training::TorchRuntime rt = tandem::training::torch_runtime();
  const std::string version = slurp(dir / "version.log");
  EXPECT_NE(version.find("LibTorch " + rt.torch_version), std::string::npos) << version;
  if (rt.cuda_built) {
    EXPECT_NE(version.find("CUDA " + rt.cuda_version), std::string::npos) << version;
    EXPECT_NE(version.find("NCCL " + rt.nccl_version), std::string::npos) << version;
    EXPECT_FALSE(rt.nccl_version.empty());
  }
  const fs::path root = gpu_family_root(dir);
  ASSERT_EQ(run_tandem("inspect --sagemaker-root " + root.string(), dir / "inspect.log", 30), 0);
  const auto j = nlohmann::json::parse(slurp(dir / "inspect.log"));
  EXPECT_EQ(j["torch"]["torch"], rt.torch_version);
  EXPECT_EQ(j["torch"]["cuda_built"], rt.cuda_built);
  EXPECT_EQ(j["torch"]["devices"].size(), rt.devices.size());
}

TEST(GradSync, BucketsOverlappedWithBackwardGiveTheSameModelAsBucketsAfterIt) {
  const fs::path dir = fresh_dir("grad-sync");
  nlohmann::json s[2];
  const char* modes[2] = {"overlap", "after-backward"};
  for (int i = 0; i < 2; ++i) {
    const std::string name = modes[i];
    // resnet18 has about 45 MB of gradients: two buckets past the small first one.
    ASSERT_EQ(run_tandem("simulate --procs-per-host 2 --worker-hosts 1 --model resnet18 --image-size 32 --steps 4"
                         " --batch-size 4 --log-every 2 --grad-sync " + name + " --run-dir " + (dir / name).string() +
                             " --summary-json " + (dir / (name + ".json")).string(),
                         dir / (name + ".log"), 240),
              0)
        << slurp(dir / (name + ".log"));
    s[i] = nlohmann::json::parse(slurp(dir / (name + ".json")));
    ASSERT_EQ(s[i]["param_checksums"].size(), 2u);
    EXPECT_EQ(s[i]["param_checksums"][0], s[i]["param_checksums"][1]) << name << ": ranks diverged";
  }
  EXPECT_GE(s[0]["grad_buckets"].get<int>(), 3);
  EXPECT_EQ(s[0]["grad_buckets_overlapped"].get<int>(), 4 * s[0]["grad_buckets"].get<int>())
      << "every bucket of every step should leave during backward";
  EXPECT_EQ(s[1]["grad_buckets_overlapped"], 0);
  EXPECT_EQ(s[0]["param_checksums"][0], s[1]["param_checksums"][0]) << "overlap changed the arithmetic";
  EXPECT_EQ(s[0]["losses"], s[1]["losses"]);
}

}  // namespace
