#include "tandem/data/core/batch.h"

#include <algorithm>
#include <cstdint>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tandem::data {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kBFloat16:
    case DType::kFloat16: return 2;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 0;
}

size_t FieldSpec::unit_bytes() const {
  size_t n = dtype_size(dtype);
  for (size_t i = ragged() ? 1 : 0; i < shape.size(); ++i) n *= shape[i] < 0 ? 0 : static_cast<size_t>(shape[i]);
  return n;
}

std::string field_spec_text(const FieldSpec& spec) {
  std::string out = spec.name + " " + dtype_name(spec.dtype) + " [";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(spec.shape[i]);
  }
  return out + "]";
}

size_t Field::expected_bytes() const {
  size_t n = dtype_size(dtype);
  for (const int64_t d : shape) {
    // A peer's absurd shape must not wrap around to the size of a small payload.
    if (__builtin_mul_overflow(n, d < 0 ? size_t{0} : static_cast<size_t>(d), &n)) return SIZE_MAX;
  }
  return n;
}

// XXH3 (xxHash, header-only: nothing to ship), sample by sample: a batch maker's thread
// hashes each row just after making it, from its cache, not the whole 19 MB batch after.
uint64_t row_digest(const std::byte* row, size_t bytes) { return XXH3_64bits(row, bytes); }

uint64_t batch_digest(const Batch& b, const std::vector<uint64_t>* rows) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(b.size(), 0));
  std::vector<uint64_t> own;
  if (!rows || rows->size() != n) {
    const size_t row = n ? b.data.size() / n : 0;
    for (size_t i = 0; i < n; ++i) own.push_back(row_digest(b.data.data() + i * row, row));
    rows = &own;
  }
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  auto add = [&](const auto& v) { XXH3_64bits_update(&state, v.data(), v.size() * sizeof(*v.data())); };
  add(*rows);
  add(b.labels);
  for (const Field& f : b.fields) add(f.data);
  return XXH3_64bits_digest(&state);
}

}  // namespace tandem::data
