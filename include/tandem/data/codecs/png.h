// PNG decoding with libpng, to 8-bit gray or RGB as torchvision's decode_png (and PIL's
// convert) give it: palettes and low bit depths expanded, 16-bit reduced to 8, alpha dropped.
#pragma once

#include <cstdint>
#include <span>

#include "tandem/data/codecs/image.h"
#include "tandem/data/codecs/jpeg.h"  // DecodeError

namespace tandem::data {

bool is_png(std::span<const uint8_t> file);

// Decodes the whole image as 1 (gray) or 3 (RGB) channels into `out`. Throws DecodeError
// for corrupt or truncated data.
void decode_png(std::span<const uint8_t> file, int channels, Image& out);

}  // namespace tandem::data
