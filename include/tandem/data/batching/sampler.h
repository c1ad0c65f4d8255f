// Which samples make up each batch: an epoch-seeded shuffle cut into batches, with each
// data-parallel rank taking a disjoint slice of every global batch.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "tandem/data/core/batch.h"

namespace tandem::data {

class Sampler {
 public:
  // REQUIRES: batch_size * world <= dataset_size, 0 <= rank < world.
  // Throws ConfigError when the dataset is too small for one global batch.
  Sampler(uint64_t dataset_size, int batch_size, uint64_t seed, int rank = 0, int world = 1);

  // Global batches per epoch; the incomplete tail of each epoch is dropped.
  uint64_t batches_per_epoch() const { return batches_per_epoch_; }

  // The request for this rank's `sequence`-th batch (epoch = sequence / batches_per_epoch).
  BatchRequest request(uint64_t sequence) const;

 private:
  const std::vector<uint64_t>& permutation(uint32_t epoch) const;

  uint64_t dataset_size_;
  int batch_size_;
  uint64_t seed_;
  int rank_;
  int world_;
  uint64_t batches_per_epoch_;
  mutable std::mutex mu_;
  mutable uint32_t cached_epoch_ = UINT32_MAX;   // GUARDED_BY(mu_)
  mutable std::vector<uint64_t> cached_order_;   // GUARDED_BY(mu_)
};

}  // namespace tandem::data
