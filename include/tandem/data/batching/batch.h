// Values that travel between the data plane and the training loop. Batches carry
// megabytes, so they are move-only: an expensive copy has to be spelled out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/batching/buffer.h"

namespace tandem::data {

enum class DType : uint8_t { kFloat32, kBFloat16, kFloat16, kUInt8 };

// The dtype as flags, settings and summaries write it: "float32", "bfloat16", "float16",
// "uint8".
const char* dtype_name(DType dtype);
// Bytes per value of `dtype`: 4, 2, 2 or 1.
size_t dtype_size(DType dtype);

// One batch the trainer wants: which samples, in which epoch, delivered in which order.
struct BatchRequest {
  uint64_t sequence = 0;
  uint32_t epoch = 0;
  std::vector<uint64_t> indices;
};

struct Batch {
  uint64_t sequence = 0;
  uint32_t epoch = 0;
  std::vector<int64_t> shape;   // [N, C, H, W]
  DType dtype = DType::kFloat32;
  std::vector<int64_t> labels;  // N
  std::vector<uint64_t> indices;  // N: the samples it was made from (echoed over the wire)
  Buffer data;                  // row-major payload, shape x dtype
  double compute_seconds = 0;   // CPU-seconds spent producing it
  int source = -1;              // which feeder source delivered it (set by the feeder)

  Batch() = default;
  Batch(Batch&&) = default;
  Batch& operator=(Batch&&) = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  int64_t size() const { return shape.empty() ? 0 : shape[0]; }
};

}  // namespace tandem::data
