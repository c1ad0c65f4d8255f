// What the file datasets (imagefolder, mnist) share: where their files are, how many
// samples an epoch has, and the index check.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "tandem/data/core/dataset.h"
#include "tandem/data/core/options.h"

namespace tandem::data {

// "mnist:/data/x" -> {"mnist", "/data/x"}; "mnist" -> {"mnist", ""}.
std::pair<std::string, std::string> split_source(const std::string& data);

// FILE of --data python:FILE:NAME, as given (relative to the working directory).
std::string python_file_of(const DataOptions& opts);

// The files of `opts.data`: its PATH, or else the SageMaker channel
// <root>/input/data/<opts.channel>, root = opts.sagemaker_root, else $TANDEM_SAGEMAKER_ROOT,
// else /opt/ml. Throws ConfigError when that path does not exist.
std::string data_path(const DataOptions& opts);

// Samples per epoch from `available` items: all of them when `requested` (--dataset-size)
// is 0, else `requested` of them, evenly strided (item_of). Throws ConfigError when there
// are fewer than asked for, or none.
uint64_t samples_per_epoch(uint64_t requested, uint64_t available, const std::string& what);

// Which item sample `index` of a `size`-sample epoch over `available` items is.
inline uint64_t item_of(uint64_t index, uint64_t size, uint64_t available) {
  return size == available ? index : static_cast<uint64_t>((static_cast<__uint128_t>(index) * available) / size);
}

// Throws std::out_of_range when index >= info.size, as Dataset::produce promises.
void check_sample_index(uint64_t index, const DatasetInfo& info);

}  // namespace tandem::data
