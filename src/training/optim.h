// Optimizers and the learning-rate schedule (Torch world only).
#pragma once

#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "tandem/training/trainer_options.h"

namespace tandem::training {

// sgd (momentum), adam or adamw over `params`, with opts.lr and opts.weight_decay.
// `device` is where the parameters live (fused kernels are used where LibTorch has them).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerOptions& opts, std::vector<torch::Tensor> params,
                                                        torch::Device device);

// The learning rate for `step` (0-based): linear warmup over opts.warmup_steps, then
// constant or cosine decay to 0 at opts.steps.
double learning_rate(const OptimizerOptions& opts, int64_t step);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace tandem::training
