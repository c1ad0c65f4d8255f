#include "tandem/training/runtime.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "torch_version.h"

#if defined(TANDEM_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/nccl.h>
#endif

namespace tandem::training {
namespace {

#if defined(TANDEM_WITH_CUDA)
// CUDA encodes versions as 1000 * major + 10 * minor.
std::string cuda_version_string(int v) { return v > 0 ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : ""; }
#endif

}  // namespace

TorchRuntime torch_runtime() {
  TorchRuntime rt;
  rt.torch_version = TORCH_VERSION;
#if defined(TANDEM_WITH_CUDA)
  rt.cuda_built = true;
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) rt.cuda_version = cuda_version_string(runtime);
  if (cudaDriverGetVersion(&driver) == cudaSuccess) rt.cuda_driver = cuda_version_string(driver);
  // Torch packs the NCCL it was built with as major << 32 | minor << 16 | patch.
  const uint64_t nccl = torch::cuda::nccl::version();
  if (nccl > 0) rt.nccl_version = fmt::format("{}.{}.{}", nccl >> 32, (nccl >> 16) & 0xffff, nccl & 0xffff);
  const int n = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  for (int i = 0; i < n; ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    rt.devices.push_back(fmt::format("cuda:{} {} ({:.1f} GiB, sm_{}{})", i, p->name,
                                     static_cast<double>(p->totalGlobalMem) / (1 << 30), p->major, p->minor));
  }
#endif
  return rt;
}

std::string describe(const TorchRuntime& rt) {
  std::string s = "LibTorch " + rt.torch_version;
  if (!rt.cuda_built) return s + " (CPU only: built without CUDA)";
  s += ", CUDA " + (rt.cuda_version.empty() ? std::string("?") : rt.cuda_version);
  s += ", NCCL " + (rt.nccl_version.empty() ? std::string("?") : rt.nccl_version);
  s += ", driver " + (rt.cuda_driver.empty() ? std::string("none") : "CUDA " + rt.cuda_driver);
  s += ", GPUs: ";
  if (rt.devices.empty()) return s + "none";
  for (size_t i = 0; i < rt.devices.size(); ++i) s += (i ? "; " : "") + rt.devices[i];
  return s;
}

nlohmann::json to_json(const TorchRuntime& rt) {
  return {{"torch", rt.torch_version},     {"cuda_built", rt.cuda_built}, {"cuda", rt.cuda_version},
          {"cuda_driver", rt.cuda_driver}, {"nccl", rt.nccl_version},     {"devices", rt.devices}};
}

bool has_builtin_trainer() { return true; }

void require_builtin_trainer(const std::string&) {}

std::string why_no_gpu(const TorchRuntime& rt) {
  if (!rt.cuda_built) {
    return "this tandem was built without CUDA (LibTorch " + rt.torch_version +
           " is CPU-only): use the CUDA image (examples/sagemaker/Dockerfile)";
  }
  if (rt.devices.empty()) {
    return std::string("this tandem has CUDA but sees no GPU (") +
           (rt.cuda_driver.empty() ? "no NVIDIA driver is loaded" : "driver CUDA " + rt.cuda_driver) +
           "): run the container with the GPUs (SageMaker does on GPU instances; docker needs --gpus all), "
           "and check CUDA_VISIBLE_DEVICES";
  }
  return {};
}

}  // namespace tandem::training
