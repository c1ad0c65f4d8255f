// The most pixels an image file may declare (--max-image-pixels), checked on its header
// before anything of the image is allocated: an 86-byte PNG can declare 100000 x 100000
// pixels (a decompression bomb), which a decoder would otherwise allocate whole.
#pragma once

#include <cstdint>

#include "tandem/data/codecs/jpeg.h"  // DecodeError, ImageSize

namespace tandem::data {

// An image whose header declares more pixels than the limit. A DecodeError, so a file
// dataset treats it as any other unusable file (--on-bad-sample).
class ImageTooLarge : public DecodeError {
 public:
  using DecodeError::DecodeError;
};

// Throws ImageTooLarge, naming the size and --max-image-pixels, when size has more than
// `max_pixels` pixels (or a non-positive side).
void check_image_pixels(ImageSize size, uint64_t max_pixels);

}  // namespace tandem::data
