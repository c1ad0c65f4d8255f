#include "tandem/data/batching/batch.h"

namespace tandem::data {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
    case DType::kUInt8: return "uint8";
  }
  return "unknown";
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kBFloat16:
    case DType::kFloat16: return 2;
    case DType::kUInt8: return 1;
  }
  return 0;
}

}  // namespace tandem::data
