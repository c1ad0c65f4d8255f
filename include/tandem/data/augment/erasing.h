// RandomErasing with torchvision's semantics (transforms.RandomErasing, v0.14) on uint8
// images: a rectangle of random area and aspect ratio set to one value.
#pragma once

#include <optional>

#include "tandem/data/codecs/image.h"
#include "tandem/data/core/rng.h"

namespace tandem::data {

struct RandomErasingOptions {
  double p = 0.5;                          // chance of erasing at all
  double scale_min = 0.02, scale_max = 0.33;  // of the image's area
  double ratio_min = 0.3, ratio_max = 3.3;    // height / width, drawn log-uniform
  int value = 0;                           // what the rectangle is set to, every channel
};

// RandomErasing.get_params: 10 attempts of (area, log-uniform aspect ratio) until the
// rectangle fits strictly inside; then its position. nullopt when no attempt fits
// (torchvision then returns the image unchanged).
std::optional<CropBox> random_erasing_box(int height, int width, const RandomErasingOptions& o, Rng& rng);

// F.erase(img, top, left, h, w, value): every channel of the box set to `value`.
void erase(Image& image, const CropBox& box, uint8_t value);

// RandomErasing.forward: with probability p, erase a drawn box.
void random_erasing(Image& image, const RandomErasingOptions& o, Rng& rng);

}  // namespace tandem::data
