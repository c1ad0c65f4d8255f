// An 8-bit image in memory, the unit the augmentation pipeline works on. Pixels are
// interleaved (HWC, row-major), as decoders write them; the pipeline's last step writes
// the planar CHW layout batches travel in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem::data {

struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;             // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // height * width * channels bytes, HWC

  // Sets the shape; keeps the allocation when it is large enough (contents undefined).
  // Allocates kPadding bytes more than the pixels: vector code may read or write up to
  // 4 bytes at the last pixel.
  void reshape(int h, int w, int c) {
    height = h;
    width = w;
    channels = c;
    const size_t n = static_cast<size_t>(h) * w * c + kPadding;
    if (pixels.size() < n) pixels.resize(n);
  }
  static constexpr size_t kPadding = 16;
  size_t bytes() const { return static_cast<size_t>(height) * width * channels; }
  size_t stride() const { return static_cast<size_t>(width) * channels; }
  uint8_t* row(int y) { return pixels.data() + y * stride(); }
  const uint8_t* row(int y) const { return pixels.data() + y * stride(); }
};

// A crop in pixels: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
};

// Writes `image` planar (CHW) to `out` (image.bytes() bytes), mirrored left-right when
// `flip` (a horizontal flip folded into the copy). REQUIRES: 1 or 3 channels.
void write_chw(const Image& image, uint8_t* out, bool flip = false);

}  // namespace tandem::data
