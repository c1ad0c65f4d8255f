// float32 samples to the dtype they travel as. uint8 assumes values in [0, 1] (scaled
// by 255, rounded, clamped): real image pipelines ship uint8 and normalise on the
// trainer's device, 4x less network than float32.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "tandem/common/settings.h"
#include "tandem/data/batch.h"

namespace tandem::data {

// Writes n values converted to `dtype` at `out` (n * dtype_size(dtype) bytes).
void convert_from_float(const float* in, size_t n, DType dtype, std::byte* out);

// The dtype batches travel as under `opts.wire_dtype`: float32 when unset.
DType wire_dtype(const DataOptions& opts);

// Parses "float32", "bfloat16", "float16", "uint8". Throws ConfigError naming the choices.
DType parse_dtype(const std::string& name);

}  // namespace tandem::data
