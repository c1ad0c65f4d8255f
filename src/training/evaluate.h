// Held-out evaluation (Torch world only), sharded across data-parallel ranks: rank r of
// W scores samples r, r + W, r + 2W, ..., so the shards cover the set exactly once and
// no rank idles in a collective while another evaluates.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "device_feed.h"
#include "model.h"
#include "tandem/data/core/dataset.h"

namespace tandem::training {

struct EvalCounts {
  int64_t correct = 0;
  int64_t samples = 0;
};

// Top-1 counts on this rank's shard, in batches of up to 256, with the model in eval
// mode (restored to train mode after). `progress` (may be empty) hears the shard's
// samples done and its size after every batch.
EvalCounts evaluate_shard(Model& model, const std::shared_ptr<const data::Dataset>& eval, int rank, int world,
                          torch::Device device, const InputFormat& format,
                          const std::function<void(int64_t done, int64_t total)>& progress = {});

}  // namespace tandem::training
