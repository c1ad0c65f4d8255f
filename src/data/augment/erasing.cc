// RandomErasing: torchvision's box draw (float32 log-ratio bounds, Python's rounding) and erase.
#include "tandem/data/augment/erasing.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tandem::data {

std::optional<CropBox> random_erasing_box(int height, int width, const RandomErasingOptions& o, Rng& rng) {
  const double area = static_cast<double>(height) * width;
  // torch.log(torch.tensor(ratio)): float32 bounds.
  const double log_min = std::log(static_cast<float>(o.ratio_min)), log_max = std::log(static_cast<float>(o.ratio_max));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * rng.uniform(o.scale_min, o.scale_max);
    const double aspect = std::exp(rng.uniform(log_min, log_max));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(erase_area * aspect)));  // round(): half to even
    const int w = static_cast<int>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    const int top = static_cast<int>(rng.below(static_cast<uint64_t>(height - h + 1)));
    const int left = static_cast<int>(rng.below(static_cast<uint64_t>(width - w + 1)));
    return CropBox{top, left, h, w};
  }
  return std::nullopt;
}

void erase(Image& image, const CropBox& box, uint8_t value) {
  const int top = std::max(box.top, 0), bottom = std::min(box.top + box.height, image.height);
  const int left = std::max(box.left, 0), right = std::min(box.left + box.width, image.width);
  if (top >= bottom || left >= right) return;
  const size_t c = static_cast<size_t>(image.channels);
  for (int y = top; y < bottom; ++y) std::memset(image.row(y) + left * c, value, (right - left) * c);
}

void random_erasing(Image& image, const RandomErasingOptions& o, Rng& rng) {
  if (!(rng.uniform() < o.p)) return;
  if (const auto box = random_erasing_box(image.height, image.width, o, rng)) erase(image, *box, static_cast<uint8_t>(o.value));
}

}  // namespace tandem::data
