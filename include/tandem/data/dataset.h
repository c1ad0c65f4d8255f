// A dataset is a source plus its augmentation pipeline: index + epoch -> finished sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/batch.h"

namespace tandem::data {

struct DatasetInfo {
  std::string name;                  // e.g. "synthetic"
  uint64_t size = 0;                 // samples per epoch
  std::vector<int64_t> sample_shape;  // [C, H, W]
  DType dtype = DType::kFloat32;
  int num_classes = 0;
  // Hash of everything that determines sample values; trainer and workers compare it.
  std::string fingerprint;

  size_t sample_bytes() const;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual const DatasetInfo& info() const = 0;
  // Writes sample `index` as augmented in `epoch` into `out` (info().sample_bytes()
  // bytes) and returns its label. Thread-safe. Throws std::out_of_range for a bad index.
  virtual int64_t produce(uint64_t index, uint32_t epoch, std::span<std::byte> out) const = 0;
};

// Builds the dataset that `opts.data` names. Throws ConfigError for unknown names or
// settings the dataset cannot honour.
std::shared_ptr<const Dataset> make_dataset(const DataOptions& opts);

// Hex FNV-1a of a description string; stable across builds and machines.
std::string fingerprint_of(const std::string& description);

}  // namespace tandem::data
