#include "tandem/data/batching/sampler.h"

#include <numeric>
#include <string>

#include "tandem/common/error.h"
#include "tandem/data/core/rng.h"

namespace tandem::data {

Sampler::Sampler(uint64_t dataset_size, int batch_size, uint64_t seed, int rank, int world)
    : dataset_size_(dataset_size), batch_size_(batch_size), seed_(seed), rank_(rank), world_(world) {
  if (batch_size < 1) throw ConfigError("--batch-size must be at least 1, got " + std::to_string(batch_size));
  const uint64_t global = static_cast<uint64_t>(batch_size) * world;
  if (dataset_size < global) {
    throw ConfigError("the dataset has " + std::to_string(dataset_size) +
                      " samples, fewer than one global batch of " + std::to_string(global) +
                      ": lower --batch-size or raise --dataset-size");
  }
  batches_per_epoch_ = dataset_size / global;
  // The first epoch's shuffle now, on the caller's thread: a dataset too large to
  // shuffle is a clear error at start rather than a dying feeder thread later.
  try {
    std::lock_guard lock(mu_);
    permutation(0);
  } catch (const std::bad_alloc&) {
    throw ConfigError("shuffling " + std::to_string(dataset_size) + " samples needs " +
                      std::to_string(dataset_size * 8 >> 20) + " MiB, more than this host can give: lower --dataset-size");
  }
}

const std::vector<uint64_t>& Sampler::permutation(uint32_t epoch) const {
  if (cached_epoch_ != epoch) {
    cached_order_.resize(dataset_size_);
    std::iota(cached_order_.begin(), cached_order_.end(), uint64_t{0});
    Rng rng(kShuffleStream, seed_, epoch);
    for (uint64_t i = dataset_size_ - 1; i > 0; --i) std::swap(cached_order_[i], cached_order_[rng.below(i + 1)]);
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

DataPosition position_at(uint64_t step, uint64_t dataset_size, int batch_size, int world) {
  const uint64_t global = static_cast<uint64_t>(batch_size) * static_cast<uint64_t>(world);
  const uint64_t per_epoch = dataset_size / global;
  return {static_cast<uint32_t>(step / per_epoch), (step % per_epoch) * global, world, batch_size, dataset_size,
          per_epoch * global};
}

DataPosition Sampler::position(uint64_t sequence) const {
  return position_at(sequence, dataset_size_, batch_size_, world_);
}

std::vector<uint64_t> Sampler::order(uint32_t epoch) const {
  std::lock_guard lock(mu_);
  return permutation(epoch);
}

BatchRequest Sampler::request(uint64_t sequence) const {
  BatchRequest req;
  req.sequence = sequence;
  req.epoch = static_cast<uint32_t>(sequence / batches_per_epoch_);
  const uint64_t in_epoch = sequence % batches_per_epoch_;
  const uint64_t first = (in_epoch * world_ + rank_) * static_cast<uint64_t>(batch_size_);
  std::lock_guard lock(mu_);
  const auto& order = permutation(req.epoch);
  req.indices.assign(order.begin() + first, order.begin() + first + batch_size_);
  return req;
}

}  // namespace tandem::data
