// The layout change at the end of every pipeline: interleaved HWC to planar CHW.
#include "tandem/data/codecs/image.h"

#include <cstring>

#include "tandem/common/simd.h"

namespace tandem::data {

TANDEM_VECTOR_CLONES void write_chw(const Image& image, uint8_t* out, bool flip) {
  const int c = image.channels, w = image.width;
  const size_t plane = static_cast<size_t>(image.height) * w;
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* p = image.row(y);
    uint8_t* r = out + static_cast<size_t>(y) * w;
    if (c == 1 && !flip) {
      std::memcpy(r, p, w);
    } else if (c == 1) {
      for (int x = 0; x < w; ++x) r[w - 1 - x] = p[x];
    } else if (!flip) {
      for (int x = 0; x < w; ++x) r[x] = p[3 * x], r[plane + x] = p[3 * x + 1], r[2 * plane + x] = p[3 * x + 2];
    } else {
      for (int x = 0; x < w; ++x) {
        const int d = w - 1 - x;
        r[d] = p[3 * x], r[plane + d] = p[3 * x + 1], r[2 * plane + d] = p[3 * x + 2];
      }
    }
  }
}

}  // namespace tandem::data
