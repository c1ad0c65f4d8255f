#include "tandem/data/core/dataset.h"

namespace tandem::data {

std::vector<int64_t> Dataset::make_samples(std::span<const uint64_t> indices, uint32_t epoch,
                                           const std::function<SampleOut(size_t)>& out, SampleReads* /*reads*/,
                                           size_t /*first*/) const {
  std::vector<int64_t> labels(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const SampleOut to = out(k);
    labels[k] = make_sample(indices[k], epoch, to.image, to.fields);
  }
  return labels;
}

}  // namespace tandem::data
