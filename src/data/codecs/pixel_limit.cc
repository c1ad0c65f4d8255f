#include "tandem/data/codecs/pixel_limit.h"

#include <string>

namespace tandem::data {

void check_image_pixels(ImageSize size, uint64_t max_pixels) {
  if (size.height <= 0 || size.width <= 0) {
    throw DecodeError("the header declares a " + std::to_string(size.width) + " x " + std::to_string(size.height) +
                      " image");
  }
  const uint64_t pixels = static_cast<uint64_t>(size.height) * static_cast<uint64_t>(size.width);
  if (pixels <= max_pixels) return;
  throw ImageTooLarge("the header declares a " + std::to_string(size.width) + " x " + std::to_string(size.height) +
                      " image (" + std::to_string(pixels) + " pixels), more than --max-image-pixels " +
                      std::to_string(max_pixels) + " (raise it if such images are real)");
}

}  // namespace tandem::data
