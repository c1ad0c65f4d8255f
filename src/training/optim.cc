#include "optim.h"

#include <cmath>

#include <torch/torch.h>

#include "fused_optim.h"
#include "tandem/common/error.h"

namespace tandem::training {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerOptions& opts, std::vector<torch::Tensor> params,
                                                        torch::Device device) {
  (void)device;  // the fused kernels run on the CPU and on CUDA alike
  if (opts.fused) {
    if (auto fused = make_fused_optimizer(opts, params)) return fused;
  }
  if (opts.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(opts.lr).momentum(opts.momentum).weight_decay(opts.weight_decay));
  }
  if (opts.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(opts.lr).weight_decay(opts.weight_decay));
  }
  if (opts.optimizer == "adamw") {
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(opts.lr).weight_decay(opts.weight_decay));
  }
  throw ConfigError("unknown --optimizer '" + opts.optimizer + "': use sgd, adam or adamw");
}

double learning_rate(const OptimizerOptions& opts, int64_t step) {
  if (step < opts.warmup_steps) return opts.lr * static_cast<double>(step + 1) / static_cast<double>(opts.warmup_steps);
  if (opts.schedule != "cosine") return opts.lr;
  const double span = static_cast<double>(std::max<int64_t>(opts.steps - opts.warmup_steps, 1));
  const double progress = std::min(1.0, static_cast<double>(step - opts.warmup_steps) / span);
  return 0.5 * opts.lr * (1.0 + std::cos(M_PI * progress));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace tandem::training
