#include "reducer.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>

#include "collective.h"

namespace tandem::training {

Reducer::Reducer(std::vector<torch::Tensor> params, Collective& collective, bool overlap, int64_t first_bucket_bytes,
                 int64_t bucket_bytes)
    : collective_(collective), overlap_(overlap) {
  for (auto& p : params) {
    if (p.requires_grad()) params_.push_back(p);
  }
  build_buckets(first_bucket_bytes, bucket_bytes);
  if (!overlap_ || !collective_.grouped()) return;
  for (size_t i = 0; i < params_.size(); ++i) {
    AccumulatorRef acc = torch::autograd::impl::grad_accumulator(params_[i]);
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_gradient(i);
          return outputs;
        })));
    accumulators_.push_back(std::move(acc));
  }
}

Reducer::~Reducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

// Buckets in reverse parameter order, split by dtype and device. Each gradient becomes a
// view of its bucket with the parameter's own strides (channels-last stays channels-last),
// which autograd then accumulates into in place.
void Reducer::build_buckets(int64_t first_bucket_bytes, int64_t bucket_bytes) {
  bucket_of_.assign(params_.size(), 0);
  grad_ptrs_.assign(params_.size(), nullptr);
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    bool start = groups.empty();
    if (!start) {
      const torch::Tensor& head = params_[groups.back().front()];
      const int64_t cap = groups.size() == 1 ? first_bucket_bytes : bucket_bytes;
      start = bytes + static_cast<int64_t>(p.nbytes()) > cap || head.scalar_type() != p.scalar_type() ||
              head.device() != p.device();
    }
    if (start) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += static_cast<int64_t>(p.nbytes());
  }
  torch::NoGradGuard no_grad;
  for (auto& members : groups) {
    Bucket b;
    int64_t numel = buckets_.empty() ? 1 : 0;  // bucket 0 holds the vote
    for (size_t k : members) numel += params_[k].numel();
    const torch::Tensor& first = params_[members.front()];
    b.buffer = torch::zeros({numel}, first.options());
    if (buckets_.empty()) vote_ = b.buffer.narrow(0, numel - 1, 1);
    int64_t offset = 0;
    for (size_t k : members) {
      torch::Tensor& p = params_[k];
      // Dense parameters (contiguous or channels-last) keep their layout in the bucket.
      torch::Tensor view = p.is_non_overlapping_and_dense()
                               ? b.buffer.as_strided(p.sizes(), p.strides(), offset)
                               : b.buffer.narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) view.copy_(p.grad());
      p.mutable_grad() = view;
      grad_ptrs_[k] = view.data_ptr();
      offset += p.numel();
      bucket_of_[k] = buckets_.size();
    }
    b.params = std::move(members);
    b.pending = b.params.size();
    buckets_.push_back(std::move(b));
  }
}

torch::Tensor Reducer::bucket(int64_t i) const {
  const torch::Tensor& buffer = buckets_.at(static_cast<size_t>(i)).buffer;
  return i == 0 ? buffer.narrow(0, 0, buffer.numel() - 1) : buffer;
}

void Reducer::zero_grad(bool stop) {
  for (auto& b : buckets_) b.buffer.zero_();
  stop_ = stop;
  if (stop && vote_.defined()) vote_.fill_(1);
}

void Reducer::clip_grad_norm(double max_norm) {
  if (buckets_.empty()) return;
  std::vector<torch::Tensor> norms;
  for (int64_t i = 0; i < bucket_count(); ++i) norms.push_back(bucket(i).norm(2).to(torch::kFloat32));
  const torch::Tensor total = torch::stack(norms).norm(2);
  const torch::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (auto& b : buckets_) b.buffer.mul_(coef.to(b.buffer.scalar_type()));
}

void Reducer::on_gradient(size_t param) {
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = buckets_[bucket_of_[param]];
  if (b.pending == 0) {
    // Thrown into autograd, so backward() fails with it.
    throw std::logic_error("parameter " + std::to_string(param) +
                           "'s gradient arrived twice before the buckets were sent: tandem's gradient buckets take "
                           "one backward per step");
  }
  --b.pending;
  launch_ready();
}

void Reducer::launch_ready() {
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) {
    launch(buckets_[next_++]);
    ++launched_in_backward_;
  }
}

void Reducer::launch(Bucket& b) {
  // Dividing first keeps the sum in range; by a power of two it is exact.
  b.buffer.div_(collective_.world());
  b.work = collective_.allreduce_async(b.buffer);
}

bool Reducer::finish() {
  // Autograd must have accumulated into the bucket views; a gradient that was replaced
  // (zero_grad(set_to_none), a backward with create_graph) would be silently dropped.
  for (size_t k = 0; k < params_.size(); ++k) {
    const torch::Tensor& g = params_[k].grad();
    if (!g.defined() || g.data_ptr() != grad_ptrs_[k]) {
      throw std::logic_error("parameter " + std::to_string(k) +
                             "'s gradient is no longer a view of its allreduce bucket: zero gradients with "
                             "Reducer::zero_grad, not the optimizer's zero_grad");
    }
  }
  if (!collective_.grouped()) return stop_;
  if (buckets_.empty()) return collective_.any(stop_);
  std::lock_guard<std::mutex> lock(mu_);
  // Parameters that took no part in this backward leave their bucket incomplete: send it
  // anyway, in order, so every rank issues the same collectives.
  while (next_ < buckets_.size()) launch(buckets_[next_++]);
  for (auto& b : buckets_) {
    if (b.work) b.work->wait();
    b.work.reset();
    b.pending = b.params.size();
  }
  next_ = 0;
  // Votes were divided by the world size like the gradients: any vote leaves it above 0.
  return vote_.item<float>() > 0;
}

}  // namespace tandem::training
