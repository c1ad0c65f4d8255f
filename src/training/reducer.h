// Gradient averaging across data-parallel ranks, overlapped with backward (Torch world
// only), the way DDP's reducer does it:
//  - parameters are grouped, in reverse registration order (roughly the order backward
//    produces their gradients), into flat buckets: the first small, so communication
//    starts early, the rest about 25 MB;
//  - every parameter's .grad is a view into its bucket, so autograd accumulates straight
//    into the buffer that is sent, and the averaged result needs no copy back;
//  - a hook on each parameter's gradient accumulator counts down its bucket; a bucket is
//    allreduced as soon as it is complete and every bucket before it has been launched,
//    so every rank issues the same collectives in the same order;
//  - bucket 0 carries one more element, each rank's vote to stop, so that ranks agree on
//    stopping at every step without a collective of their own.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <torch/csrc/autograd/variable.h>
#include <torch/types.h>

namespace c10d {
class Work;
}

namespace tandem::training {

class Collective;

class Reducer {
 public:
  // `overlap` false launches every bucket after backward instead (the same buckets and
  // arithmetic: the reference the overlapped path is tested against).
  // REQUIRES: params are on their final device and memory format; they stay alive.
  Reducer(std::vector<torch::Tensor> params, Collective& collective, bool overlap, int64_t first_bucket_bytes = 1 << 20,
          int64_t bucket_bytes = 25 << 20);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Zeroes every bucket (and so every gradient) and records this rank's vote to stop
  // after this step. Call before each backward, instead of the optimizer's zero_grad,
  // which would detach the views.
  void zero_grad(bool stop = false);

  // After backward (or instead of it, on a rank with no batch: its gradients count as
  // zero): launches what is left, waits for every bucket (on CUDA the wait is enqueued
  // on the current stream) and leaves averaged gradients. Returns true if any rank voted
  // to stop, the same answer on every rank; then no rank should apply this step.
  bool finish();

  // Scales every gradient so that their global L2 norm is at most `max_norm` (as
  // torch.nn.utils.clip_grad_norm_), computed on the device from the buckets: no host sync.
  void clip_grad_norm(double max_norm);

  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  // Buckets sent from autograd hooks, before finish(), since construction: proof that
  // communication overlapped backward.
  int64_t launched_in_backward() const { return launched_in_backward_; }
  // The gradients of bucket i (without the vote).
  torch::Tensor bucket(int64_t i) const;

 private:
  struct Bucket {
    torch::Tensor buffer;           // flat, one dtype and device
    std::vector<size_t> params;     // indices into params_
    size_t pending = 0;             // gradients still to arrive this backward
    c10::intrusive_ptr<c10d::Work> work;
  };
  void build_buckets(int64_t first_bucket_bytes, int64_t bucket_bytes);
  void on_gradient(size_t param);  // from autograd's threads
  void launch_ready();             // REQUIRES: mu_ held
  void launch(Bucket& b);          // REQUIRES: mu_ held

  std::vector<torch::Tensor> params_;
  std::vector<size_t> bucket_of_;  // param -> bucket
  std::vector<Bucket> buckets_;
  Collective& collective_;
  bool overlap_;
  // Keeps the hooks alive: a parameter holds its accumulator weakly. (shared_ptr up to
  // LibTorch 2.12, intrusive_ptr after: whatever grad_accumulator returns.)
  using AccumulatorRef = decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()));
  std::vector<AccumulatorRef> accumulators_;
  std::vector<uintptr_t> hook_keys_;    // per accumulator, to remove the hooks (they capture this)
  std::vector<const void*> grad_ptrs_;  // per parameter: where its gradient view starts
  torch::Tensor vote_;  // the last element of bucket 0
  bool stop_ = false;   // this rank's vote this step
  std::mutex mu_;
  size_t next_ = 0;  // the next bucket to launch; GUARDED_BY(mu_)
  int64_t launched_in_backward_ = 0;  // GUARDED_BY(mu_)
};

}  // namespace tandem::training
