// Data parallelism over c10d (Torch world only): rendezvous through a TCPStore on rank
// 0's host, Gloo on CPU, NCCL on CUDA when built with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace c10d {
class Work;
}

#include "tandem/training/run_types.h"

namespace tandem::training {

class Collective {
 public:
  // Joins the process group: NCCL when `device` is a GPU, else Gloo. A world of 1 needs
  // no rendezvous and does nothing, unless dist.single_rank_group asks for a group of
  // one (to check the collective path on a one-GPU machine). Throws NetworkError naming
  // the master and the fix when rendezvous fails.
  Collective(const DistInfo& dist, torch::Device device);
  ~Collective();

  int rank() const { return dist_.rank; }
  int world() const { return dist_.world; }
  // Whether there is a process group: every call below is a no-op without one.
  bool grouped() const;

  // Rank `root`'s values into every rank's tensors, in place.
  void broadcast(std::vector<torch::Tensor> tensors, int root = 0);
  // Sums `t` across ranks in place, asynchronously: wait on the result. On NCCL the wait
  // makes the current CUDA stream wait, not the host.
  c10::intrusive_ptr<c10d::Work> allreduce_async(torch::Tensor& t);
  // True if `flag` is true on any rank: lets every rank stop at the same step.
  bool any(bool flag);
  // Element-wise sums of small counts across ranks (e.g. evaluation's correct answers).
  std::vector<int64_t> sum(const std::vector<int64_t>& values);
  void barrier();
  // Small values shared through the rendezvous store (e.g. checksums, a checkpoint).
  void put(const std::string& key, const std::string& value);
  std::string take(const std::string& key);

 private:
  // The process group over impl_->store; throws what c10d throws.
  void make_group(const DistInfo& dist);

  struct Impl;
  DistInfo dist_;
  torch::Device device_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::training
