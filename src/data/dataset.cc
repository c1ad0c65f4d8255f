#include "tandem/data/dataset.h"

#include <cstdio>

#include "tandem/common/error.h"
#include "tandem/data/synthetic.h"

namespace tandem::data {

size_t DatasetInfo::sample_bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : sample_shape) n *= static_cast<size_t>(d);
  return n;
}

std::shared_ptr<const Dataset> make_dataset(const DataOptions& opts) {
  if (opts.data == "synthetic") return make_synthetic(opts);
  if (opts.data == "blur-benchmark") return make_blur_benchmark(opts);
  if (opts.data == "premade") return make_premade(opts);
  throw ConfigError("unknown --data '" + opts.data +
                    "': use 'synthetic' (a small learnable task), 'blur-benchmark' or 'premade'");
}

std::string fingerprint_of(const std::string& description) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : description) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace tandem::data
