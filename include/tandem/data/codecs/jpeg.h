// JPEG decoding with libjpeg-turbo, of only the part of the image a crop needs: rows
// below the crop are never decoded, rows above it are entropy-decoded and skipped, and
// columns outside it skip the inverse DCT and colour conversion (jpeg_crop_scanline /
// jpeg_skip_scanlines: the TurboJPEG 2.1 API has no cropped decode). Optionally at a
// reduced scale (DCT scaling) when the crop is much larger than the output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "tandem/data/codecs/image.h"

#include "tandem/common/error.h"

namespace tandem::data {

// Bytes that do not decode as an image. The message names the problem, not the file.
class DecodeError : public DataError {
 public:
  using DataError::DataError;
};

bool is_jpeg(std::span<const uint8_t> file);

// Starts and ends a decoder as if compiled with these jpeglib.h values (JPEG_LIB_VERSION,
// sizeof(jpeg_decompress_struct)). Throws std::runtime_error naming the mismatch when the
// loaded libjpeg refuses them: what every decode throws when tandem was built against
// another libjpeg's headers than the library it runs with.
void check_jpeg_library(int version, size_t struct_size);

struct ImageSize {
  int height = 0, width = 0;
};

// Reads the header only. Throws DecodeError.
ImageSize jpeg_size(std::span<const uint8_t> file);

// Part of a decoded image: `image` holds the pixels of the whole image decoded at
// 1/scale_denom (scaled_height x scaled_width) from row `top` and column `left` on.
struct JpegRegion {
  Image image;
  int top = 0, left = 0;
  int scaled_height = 0, scaled_width = 0;
};

// Decodes at least the pixels of `box` (full-resolution pixels) at 1/scale_denom size,
// scale_denom in {1, 2, 4, 8}, as 1 (gray) or 3 (RGB) channels. Grayscale and CMYK files
// are converted (CMYK as PIL does). Throws DecodeError for corrupt or truncated data (a
// libjpeg warning counts as an error, except stray bytes between markers).
void decode_jpeg(std::span<const uint8_t> file, int channels, const CropBox& box, int scale_denom, JpegRegion& out);

// The full-size size of the image decoded at 1/scale_denom: ceil(size / scale_denom).
inline int jpeg_scaled(int size, int scale_denom) { return (size + scale_denom - 1) / scale_denom; }

}  // namespace tandem::data
