// What this process's LibTorch can run on: versions of Torch, CUDA, NCCL and cuDNN, and
// the GPUs it sees. Torch-free header, so `inspect`, `--version` and the launch code can
// report it without parsing LibTorch.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tandem::training {

struct TorchRuntime {
  std::string torch_version;     // e.g. "2.6.0"
  bool cuda_built = false;       // tandem was compiled with CUDA + NCCL (TANDEM_WITH_CUDA)
  std::string cuda_version;      // the CUDA runtime Torch was built with, e.g. "12.4"; empty without CUDA
  std::string cuda_driver;       // the driver's CUDA version, e.g. "12.8"; empty when there is no driver
  std::string nccl_version;      // e.g. "2.22.3"; empty without CUDA
  std::vector<std::string> devices;  // one entry per visible GPU: "cuda:0 NVIDIA H100 80GB HBM3 (79.1 GiB)"
};

// Reads the versions and enumerates the GPUs. Safe on a machine without a GPU or driver.
TorchRuntime torch_runtime();

// One line for logs and --version: "LibTorch 2.6.0, CUDA 12.4, NCCL 2.22.3, GPUs: none".
std::string describe(const TorchRuntime& rt);

nlohmann::json to_json(const TorchRuntime& rt);

// Whether this build has tandem's own LibTorch trainer (`trainer`, `bench train`, a
// trainer host with no command). The pip wheel's binary has not: it runs workers and
// users' own scripts (`launch -- COMMAND`), and links no LibTorch (TANDEM_WITH_TORCH=OFF).
bool has_builtin_trainer();

// Throws ConfigError, naming `what` asked for the trainer and where to get one, in a build
// without it; does nothing in a build with it.
void require_builtin_trainer(const std::string& what);

// Why a trainer on a GPU instance family cannot use a GPU here ("this tandem was built
// without CUDA ...", "no GPU is visible ..."), or empty when it can.
std::string why_no_gpu(const TorchRuntime& rt);

}  // namespace tandem::training
