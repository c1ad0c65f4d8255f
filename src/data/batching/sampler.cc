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

namespace {

// A run's geometry over one dataset, and where its steps meet the data.
struct Cut {
  uint64_t global, per_epoch, first;  // a global batch; global batches per epoch; in the anchor's epoch
  Cut(uint64_t size, int batch_size, int world, const DataAnchor& a)
      : global(static_cast<uint64_t>(batch_size) * static_cast<uint64_t>(world)),
        per_epoch(size / global),
        first(a.sample < size ? (size - a.sample) / global : 0) {}
};

}  // namespace

DataPosition position_at(uint64_t step, uint64_t dataset_size, int batch_size, int world, const DataAnchor& a) {
  const Cut c(dataset_size, batch_size, world, a);
  DataPosition p{a.epoch, a.sample, world, batch_size, dataset_size, c.per_epoch * c.global};
  const uint64_t after = step > a.step ? step - a.step : 0;
  if (after < c.first) {
    p.sample = a.sample + after * c.global;
  } else {
    const uint64_t t = after - c.first;
    p.epoch = a.epoch + 1 + static_cast<uint32_t>(t / c.per_epoch);
    p.sample = (t % c.per_epoch) * c.global;
  }
  return p;
}

uint64_t epoch_start_step(uint32_t epoch, uint64_t dataset_size, int batch_size, int world, const DataAnchor& a) {
  const Cut c(dataset_size, batch_size, world, a);
  if (epoch <= a.epoch) return a.step;
  return a.step + c.first + static_cast<uint64_t>(epoch - a.epoch - 1) * c.per_epoch;
}

DataAnchor anchor_at(uint64_t step, const DataPosition& then) { return {step, then.epoch, then.sample}; }

uint64_t anchor_tail(uint64_t dataset_size, int batch_size, int world, const DataAnchor& a) {
  const Cut c(dataset_size, batch_size, world, a);
  const uint64_t trained_to = a.sample + c.first * c.global;
  const uint64_t usual = c.per_epoch * c.global;  // where this geometry ends an epoch anyway
  return usual > trained_to ? usual - trained_to : 0;
}

void Sampler::anchor(const DataAnchor& a) {
  if (a.sample > dataset_size_) {
    throw ConfigError("a resume position at sample " + std::to_string(a.sample) + " is past the dataset's " +
                      std::to_string(dataset_size_) + " samples: it was written for another dataset");
  }
  anchor_ = a;
}

DataPosition Sampler::position(uint64_t sequence) const {
  return position_at(sequence, dataset_size_, batch_size_, world_, anchor_);
}

uint64_t Sampler::epoch_start(uint32_t epoch) const {
  return epoch_start_step(epoch, dataset_size_, batch_size_, world_, anchor_);
}

uint64_t Sampler::epoch_end(uint32_t epoch) const {
  const Cut c(dataset_size_, batch_size_, world_, anchor_);
  return epoch == anchor_.epoch ? anchor_.sample + c.first * c.global : c.per_epoch * c.global;
}

int Sampler::rank_of(uint32_t epoch, uint64_t p) const {
  const uint64_t start = epoch == anchor_.epoch ? anchor_.sample : 0;
  const uint64_t global = static_cast<uint64_t>(batch_size_) * static_cast<uint64_t>(world_);
  return p < start ? -1 : static_cast<int>(((p - start) % global) / static_cast<uint64_t>(batch_size_));
}

std::vector<uint64_t> Sampler::order(uint32_t epoch) const {
  std::lock_guard lock(mu_);
  return permutation(epoch);
}

BatchRequest Sampler::request(uint64_t sequence) const {
  BatchRequest req;
  req.sequence = sequence;
  const DataPosition at = position(sequence);
  req.epoch = at.epoch;
  const uint64_t first = at.sample + static_cast<uint64_t>(rank_) * static_cast<uint64_t>(batch_size_);
  std::lock_guard lock(mu_);
  const auto& order = permutation(req.epoch);
  req.indices.assign(order.begin() + first, order.begin() + first + batch_size_);
  return req;
}

}  // namespace tandem::data
