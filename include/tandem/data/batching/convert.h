// Samples to the dtype they travel as. float32 -> uint8 assumes values in [0, 1] (scaled
// by 255, rounded, clamped): real image pipelines ship uint8 and normalise on the
// trainer's device, 4x less network than float32. uint8 -> float is value / 255.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "tandem/data/core/batch.h"
#include "tandem/data/core/options.h"

namespace tandem::data {

// Writes n values converted to `dtype` at `out` (n * dtype_size(dtype) bytes).
void convert_from_float(const float* in, size_t n, DType dtype, std::byte* out);

// uint8 samples (image datasets) to `dtype`: float types get value / 255, in [0, 1], the
// same values the trainer makes of uint8 batches; uint8 is copied.
void convert_from_uint8(const uint8_t* in, size_t n, DType dtype, std::byte* out);

// The dtype batches travel as under `opts.wire_dtype`: when unset, the dataset's own
// (dataset_dtype: uint8 for imagefolder and mnist, else float32).
DType wire_dtype(const DataOptions& opts);

// Parses "float32", "bfloat16", "float16", "uint8". Throws ConfigError naming the choices.
DType parse_dtype(const std::string& name);

}  // namespace tandem::data
