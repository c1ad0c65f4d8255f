// Data parallelism over c10d (Torch world only): rendezvous through a TCPStore on rank
// 0's host, Gloo on CPU, NCCL on CUDA when built with it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tandem/training/trainer.h"

namespace tandem::training {

class Collective {
 public:
  // Joins the process group. A world of 1 needs no rendezvous and does nothing.
  // Throws NetworkError naming the master and the fix when rendezvous times out.
  Collective(const DistInfo& dist, bool cuda);
  ~Collective();

  int rank() const { return dist_.rank; }
  int world() const { return dist_.world; }

  // Rank `root`'s values into every rank's tensors, in place.
  void broadcast(std::vector<torch::Tensor> tensors, int root = 0);
  // Averages gradients across ranks, in buckets of about 25 MB (one allreduce each).
  void average_gradients(const std::vector<torch::Tensor>& params);
  // True if `flag` is true on any rank: lets every rank stop at the same step.
  bool any(bool flag);
  void barrier();
  // Small values shared through the rendezvous store (e.g. checksums, a checkpoint).
  void put(const std::string& key, const std::string& value);
  std::string take(const std::string& key);

 private:
  struct Impl;
  DistInfo dist_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::training
