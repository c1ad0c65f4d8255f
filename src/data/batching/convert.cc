#include "tandem/data/batching/convert.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "tandem/common/error.h"
#include "tandem/data/core/dataset.h"

#include "tandem/common/simd.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::data {
namespace {

// Round to nearest even, as torch's float -> bfloat16 does; NaN stays NaN.
TANDEM_VECTOR_CLONES void to_bfloat16(const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &in[i], 4);
    if (std::isnan(in[i])) {
      out[i] = static_cast<uint16_t>((bits >> 16) | 0x40);
      continue;
    }
    bits += 0x7fff + ((bits >> 16) & 1);
    out[i] = static_cast<uint16_t>(bits >> 16);
  }
}

#if defined(__FLT16_MAX__)
// _Float16 conversion compiles to F16C instructions in the x86-64-v3 clone.
using Half = _Float16;
TANDEM_VECTOR_CLONES void to_float16(const float* in, size_t n, Half* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<_Float16>(in[i]);
}
#else
// Compilers without _Float16 on x86 (clang before 15, used for the fuzz build): the same
// IEEE conversion, rounding to nearest even, in software.
using Half = uint16_t;
uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t biased = static_cast<int32_t>((x >> 23) & 0xffu);
  uint32_t mant = x & 0x7fffffu;
  if (biased == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));  // inf, nan
  const int32_t exp = biased - 127 + 15;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // too large: infinity
  if (exp <= 0) {                                                // subnormal, or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // a carry into the exponent is right
  return static_cast<uint16_t>(half);
}
void to_float16(const float* in, size_t n, Half* out) {
  for (size_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}
#endif

TANDEM_VECTOR_CLONES void to_uint8(const float* in, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(std::clamp(in[i] * 255.0f + 0.5f, 0.0f, 255.0f));
}

TANDEM_VECTOR_CLONES void u8_to_float(const uint8_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) / 255.0f;
}

}  // namespace

void convert_from_uint8(const uint8_t* in, size_t n, DType dtype, std::byte* out) {
  if (dtype == DType::kUInt8) {
    std::memcpy(out, in, n);
    return;
  }
  // Through float32 in blocks that stay in cache, with the float paths' rounding.
  float block[1024];
  for (size_t done = 0; done < n; done += 1024) {
    const size_t m = std::min<size_t>(1024, n - done);
    u8_to_float(in + done, m, block);
    convert_from_float(block, m, dtype, out + done * dtype_size(dtype));
  }
}

void convert_from_float(const float* in, size_t n, DType dtype, std::byte* out) {
  switch (dtype) {
    case DType::kFloat32: std::memcpy(out, in, n * 4); return;
    case DType::kBFloat16: return to_bfloat16(in, n, reinterpret_cast<uint16_t*>(out));
    case DType::kFloat16: return to_float16(in, n, reinterpret_cast<Half*>(out));
    case DType::kUInt8: return to_uint8(in, n, reinterpret_cast<uint8_t*>(out));
    case DType::kInt32:
    case DType::kInt64: break;  // never a wire dtype: parse_dtype does not accept them
  }
  throw ConfigError(std::string("cannot convert samples to ") + dtype_name(dtype));
}

DType wire_dtype(const DataOptions& opts) {
  return opts.wire_dtype.empty() ? dataset_dtype(opts) : parse_dtype(opts.wire_dtype);
}

DType parse_dtype(const std::string& name) {
  for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kUInt8}) {
    if (name == dtype_name(d)) return d;
  }
  throw ConfigError("unknown --wire-dtype '" + name + "': use float32, bfloat16, float16 or uint8");
}

}  // namespace tandem::data
