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

// Where a run's steps meet the data: step `step` starts at `sample` of epoch `epoch`'s
// order, and the steps after it follow in global batches of this run's geometry. A fresh
// run's anchor is step 0 at the start; a resumed run's is its checkpoint's step at the
// checkpoint's place, whatever world size and batch size wrote it, so it trains the rest
// of that epoch exactly: from there to the epoch's end, in whole global batches (the
// remainder, fewer than one global batch, is that epoch's dropped tail, as every epoch's).
struct DataAnchor {
  uint64_t step = 0;
  uint32_t epoch = 0;
  uint64_t sample = 0;
  bool operator==(const DataAnchor&) const = default;
};

// The position before step `step` (>= anchor.step) of global batches of batch_size x world.
// REQUIRES: batch_size * world <= dataset_size, anchor.sample <= dataset_size.
DataPosition position_at(uint64_t step, uint64_t dataset_size, int batch_size, int world, const DataAnchor& anchor = {});

// The step at which epoch `epoch` begins (a run of --epochs E ends before epoch_start_step(E)).
uint64_t epoch_start_step(uint32_t epoch, uint64_t dataset_size, int batch_size, int world, const DataAnchor& anchor = {});

// The anchor of a run resumed at `step` from a checkpoint written at `then`.
DataAnchor anchor_at(uint64_t step, const DataPosition& then);

// Samples of the anchor's epoch that a run of this geometry leaves untrained after the
// anchor: its remainder of fewer than one global batch (0 when the geometry is unchanged).
uint64_t anchor_tail(uint64_t dataset_size, int batch_size, int world, const DataAnchor& anchor);

class Sampler {
 public:
  // REQUIRES: batch_size * world <= dataset_size, 0 <= rank < world.
  // Throws ConfigError when the dataset is too small for one global batch.
  Sampler(uint64_t dataset_size, int batch_size, uint64_t seed, int rank = 0, int world = 1);

  // Global batches per epoch; the incomplete tail of each epoch is dropped.
  uint64_t batches_per_epoch() const { return batches_per_epoch_; }

  // Where this run's steps meet the data (DataAnchor); set before any request, never after.
  void anchor(const DataAnchor& a);
  const DataAnchor& anchor() const { return anchor_; }

  // The request for this rank's `sequence`-th batch (sequence >= anchor().step).
  BatchRequest request(uint64_t sequence) const;

  // The position before this rank's `sequence`-th batch (every rank's is the same).
  DataPosition position(uint64_t sequence) const;
  // The first step of epoch `epoch` (after the anchor's step).
  uint64_t epoch_start(uint32_t epoch) const;
  // The end of the positions this run trains of epoch `epoch`'s order (the anchor's epoch
  // ends at its last whole global batch after the anchor).
  uint64_t epoch_end(uint32_t epoch) const;
  // The anchor epoch's dropped tail at this geometry (data::anchor_tail).
  uint64_t anchor_tail() const { return data::anchor_tail(dataset_size_, batch_size_, world_, anchor_); }
  // The rank that trains position `p` of epoch `epoch`'s order.
  int rank_of(uint32_t epoch, uint64_t p) const;
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
  DataAnchor anchor_;
  mutable std::mutex mu_;
  mutable uint32_t cached_epoch_ = UINT32_MAX;   // GUARDED_BY(mu_)
  mutable std::vector<uint64_t> cached_order_;   // GUARDED_BY(mu_)
};

}  // namespace tandem::data
