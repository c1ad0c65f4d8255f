// The training loop. This header is Torch-free so the launch code that calls it (and
// that speaks gRPC) never parses LibTorch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/batch.h"
#include "tandem/data/dataset.h"

namespace tandem::training {

struct TrainReport {
  int64_t steps = 0;
  int64_t samples = 0;
  double wall_seconds = 0;
  double samples_per_sec = 0;
  double data_wait_seconds = 0;
  double data_wait_fraction = 0;  // of wall time, spent waiting for the next batch
  double first_loss = 0;
  double final_loss = 0;
  bool interrupted = false;       // stopped early by `stop`
  std::string device;             // "cpu" or "cuda:0"
  std::string model;
  int torch_threads = 0;
};

// Pulls the next batch; nullopt ends training.
using NextBatch = std::function<std::optional<data::Batch>()>;

// Trains opts.model on batches from `next` for opts.steps steps (or until batches run
// out, or `stop` becomes true), logging a metrics line every opts.log_every steps.
// Uses CUDA when available. Throws on a batch whose shape does not match `info`.
TrainReport train(const TrainerOptions& opts, const data::DatasetInfo& info, const NextBatch& next,
                  const std::atomic<bool>& stop);

// Whether this build and machine can train on a GPU, and how many GPUs it sees.
int cuda_device_count();

// Sets LibTorch's intra-op thread count for this process.
void set_torch_threads(int threads);

}  // namespace tandem::training
