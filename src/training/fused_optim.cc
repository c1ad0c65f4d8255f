#include "fused_optim.h"

#include <unordered_map>

#include <torch/torch.h>

#include "torch_version.h"

namespace tandem::training {

#if TANDEM_TORCH_AT_LEAST(2, 6)
namespace {

// Adam and AdamW share their state and differ in the kernel (L2 penalty vs decoupled
// weight decay). The kernels take each parameter's step count as a float tensor on its
// device; it is kept there and advanced with one foreach call, and rebuilt from the
// optimizer's own (saved) count whenever the two disagree, e.g. after a checkpoint load.
template <typename Base, typename Options, typename State, bool kDecoupled>
class FusedAdamT final : public Base {
 public:
  using Base::Base;

  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override {
    torch::Tensor loss;
    if (closure) loss = closure();
    torch::NoGradGuard no_grad;
    for (auto& group : this->param_groups_) {
      auto& o = static_cast<Options&>(group.options());
      std::vector<torch::Tensor> params, grads, m, v, vmax, steps, advance;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        auto& slot = this->state_[p.unsafeGetTensorImpl()];
        if (!slot) {
          auto s = std::make_unique<State>();
          s->step(0);
          s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          if (o.amsgrad()) s->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          slot = std::move(s);
        }
        auto& s = static_cast<State&>(*slot);
        s.step(s.step() + 1);
        Count& c = counts_[p.unsafeGetTensorImpl()];
        if (c.tensor.defined() && c.value + 1 == s.step()) {
          advance.push_back(c.tensor);
        } else {
          c.tensor = torch::full({}, static_cast<double>(s.step()), p.options().dtype(torch::kFloat32));
        }
        c.value = s.step();
        params.push_back(p);
        grads.push_back(p.grad());
        m.push_back(s.exp_avg());
        v.push_back(s.exp_avg_sq());
        if (o.amsgrad()) vmax.push_back(s.max_exp_avg_sq());
        steps.push_back(c.tensor);
      }
      if (params.empty()) continue;
      if (!advance.empty()) at::_foreach_add_(advance, 1.0);
      const auto [beta1, beta2] = o.betas();
      if constexpr (kDecoupled) {
        at::_fused_adamw_(params, grads, m, v, vmax, steps, o.lr(), beta1, beta2, o.weight_decay(), o.eps(),
                          o.amsgrad(), /*maximize=*/false);
      } else {
        at::_fused_adam_(params, grads, m, v, vmax, steps, o.lr(), beta1, beta2, o.weight_decay(), o.eps(),
                         o.amsgrad(), /*maximize=*/false);
      }
    }
    return loss;
  }

 private:
  struct Count {
    torch::Tensor tensor;  // float, on the parameter's device
    int64_t value = 0;     // what the host believes it holds
  };
  std::unordered_map<void*, Count> counts_;
};

using FusedAdam = FusedAdamT<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false>;
using FusedAdamW = FusedAdamT<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState, true>;

// SGD with momentum. The C++ optimizer starts a momentum buffer as a copy of the first
// gradient; the kernel does the same when told it is the first step, so parameters
// without a buffer yet get an empty one and that flag.
class FusedSGD final : public torch::optim::SGD {
 public:
  using SGD::SGD;

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::Tensor loss;
    if (closure) loss = closure();
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups_) {
      auto& o = static_cast<torch::optim::SGDOptions&>(group.options());
      std::vector<torch::Tensor> fresh_p, fresh_g, fresh_b, old_p, old_g, old_b;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        auto& slot = state_[p.unsafeGetTensorImpl()];
        const bool first = !slot;
        if (o.momentum() != 0 && first) {
          auto s = std::make_unique<torch::optim::SGDParamState>();
          s->momentum_buffer(torch::empty_like(p, torch::MemoryFormat::Preserve));
          slot = std::move(s);
        }
        auto& ps = first ? fresh_p : old_p;
        auto& gs = first ? fresh_g : old_g;
        auto& bs = first ? fresh_b : old_b;
        ps.push_back(p);
        gs.push_back(p.grad());
        if (o.momentum() != 0) bs.push_back(static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer());
      }
      for (const bool first : {true, false}) {
        auto& ps = first ? fresh_p : old_p;
        if (ps.empty()) continue;
        at::_fused_sgd_(ps, first ? fresh_g : old_g, first ? fresh_b : old_b, o.weight_decay(), o.momentum(), o.lr(),
                        o.dampening(), o.nesterov(), /*maximize=*/false, /*is_first_step=*/first);
      }
    }
    return loss;
  }
};

}  // namespace

bool fused_optimizers_available() { return true; }

std::unique_ptr<torch::optim::Optimizer> make_fused_optimizer(const OptimizerOptions& opts,
                                                              std::vector<torch::Tensor> params) {
  if (opts.optimizer == "sgd") {
    return std::make_unique<FusedSGD>(
        params, torch::optim::SGDOptions(opts.lr).momentum(opts.momentum).weight_decay(opts.weight_decay));
  }
  if (opts.optimizer == "adam") {
    return std::make_unique<FusedAdam>(params, torch::optim::AdamOptions(opts.lr).weight_decay(opts.weight_decay));
  }
  if (opts.optimizer == "adamw") {
    return std::make_unique<FusedAdamW>(params, torch::optim::AdamWOptions(opts.lr).weight_decay(opts.weight_decay));
  }
  return nullptr;
}

#else

bool fused_optimizers_available() { return false; }

std::unique_ptr<torch::optim::Optimizer> make_fused_optimizer(const OptimizerOptions&, std::vector<torch::Tensor>) {
  return nullptr;
}

#endif

}  // namespace tandem::training
