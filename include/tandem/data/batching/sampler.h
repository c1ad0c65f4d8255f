// Which samples make up each batch: an epoch-seeded shuffle cut into batches, with each
// data-parallel rank taking a disjoint slice of every global batch.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "tandem/data/core/batch.h"

namespace tandem::data {

// Where a run is in the data: the next sample's place in its epoch's order (the shuffle
// depends on the seed and the epoch alone, so a place means the same samples at any
// world size), and the geometry that got it there.
struct DataPosition {
  uint32_t epoch = 0;
  uint64_t sample = 0;          // the first position of the epoch's order not yet trained
  int world = 1;                // ranks
  int batch_size = 1;           // per rank
  uint64_t dataset_size = 0;
  uint64_t epoch_samples = 0;   // positions an epoch trains: global batches x global batch
  bool operator==(const DataPosition&) const = default;
};

// The position after `step` global batches of batch_size x world from the start.
// REQUIRES: batch_size * world <= dataset_size.
DataPosition position_at(uint64_t step, uint64_t dataset_size, int batch_size, int world);

class Sampler {
 public:
  // REQUIRES: batch_size * world <= dataset_size, 0 <= rank < world.
  // Throws ConfigError when the dataset is too small for one global batch.
  Sampler(uint64_t dataset_size, int batch_size, uint64_t seed, int rank = 0, int world = 1);

  // Global batches per epoch; the incomplete tail of each epoch is dropped.
  uint64_t batches_per_epoch() const { return batches_per_epoch_; }

  // The request for this rank's `sequence`-th batch (epoch = sequence / batches_per_epoch).
  BatchRequest request(uint64_t sequence) const;

  // The position before this rank's `sequence`-th batch (every rank's is the same).
  DataPosition position(uint64_t sequence) const;
  // Epoch `epoch`'s order of sample indices (a copy: feeders share the cached one).
  std::vector<uint64_t> order(uint32_t epoch) const;
  int rank() const { return rank_; }

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
