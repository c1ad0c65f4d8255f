// Fused optimizer steps (Torch world only): LibTorch's C++ optimizers update one
// parameter at a time (several kernels each: hundreds of launches per step for a
// ResNet-50); ATen's fused kernels (2.4+, CPU and CUDA) update them all in one pass.
// These classes keep the C++ optimizers' state and options, so checkpoints are the
// same either way, and replace only step().
#pragma once

#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "tandem/training/trainer_options.h"

namespace tandem::training {

// True when this LibTorch has the fused kernels tandem uses.
bool fused_optimizers_available();

// The fused twin of make_optimizer's choice; nullptr when unavailable.
std::unique_ptr<torch::optim::Optimizer> make_fused_optimizer(const OptimizerOptions& opts,
                                                              std::vector<torch::Tensor> params);

}  // namespace tandem::training
