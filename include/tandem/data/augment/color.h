// ColorJitter's adjustments with torchvision's semantics on uint8 images (v0.14): the
// same arithmetic where it decides a pixel (truncation in the colour blends).
#pragma once

#include "tandem/data/codecs/image.h"

namespace tandem::data {

// ColorJitter's four adjustments on uint8 (torchvision's _blend: float32, clamp, truncate).
// Factors are doubles, as Python passes them: 1 - factor is rounded to float32 only after
// the subtraction, which decides some pixels.
void adjust_brightness(Image& image, double factor);
void adjust_contrast(Image& image, double factor);
void adjust_saturation(Image& image, double factor);
void adjust_hue(Image& image, double hue_factor);  // REQUIRES: -0.5 <= hue_factor <= 0.5

// rgb_to_grayscale(num_output_channels=3) on uint8: every channel the grey level
// (0.2989 r + 0.587 g + 0.114 b in float32, truncated). A 1-channel image is left alone.
void grayscale_rgb(Image& image);

}  // namespace tandem::data
