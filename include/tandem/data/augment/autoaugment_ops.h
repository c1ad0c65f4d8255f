// The operations the AutoAugment family draws from, with torchvision's semantics on uint8
// images (v0.14, tensor path: torchvision.transforms.autoaugment._apply_op and the
// functional_tensor functions it calls): the same arithmetic where it decides a pixel.
#pragma once

#include "tandem/data/augment/geometry.h"
#include "tandem/data/codecs/image.h"

namespace tandem::data {

// _apply_op's operations, by torchvision's names.
enum class AugOp {
  kIdentity, kShearX, kShearY, kTranslateX, kTranslateY, kRotate, kBrightness, kColor, kContrast,
  kSharpness, kPosterize, kSolarize, kAutoContrast, kEqualize, kInvert,
};

// torchvision's name of `op` ("ShearX", "AutoContrast", ...).
const char* aug_op_name(AugOp op);

// adjust_sharpness: a blend with the image smoothed by [1 1 1; 1 5 1; 1 1 1] / 13 (rounded,
// borders kept), float32, clamp, truncate. Images of 2 pixels or fewer across are kept.
void adjust_sharpness(Image& image, double factor);

// posterize: keep the top `bits` bits of every value. REQUIRES: 0 <= bits <= 8.
void posterize(Image& image, int bits);

// solarize: values >= threshold (compared in float32) become 255 - value.
void solarize(Image& image, double threshold);

// autocontrast: each channel stretched from [min, max] to [0, 255] (float32, truncated);
// a flat channel is kept.
void autocontrast(Image& image);

// equalize: each channel through torchvision's histogram LUT (integer arithmetic; the
// channel is kept when its histogram step is 0).
void equalize(Image& image);

// invert: 255 - value.
void invert(Image& image);

// _apply_op(img, op, magnitude, interpolation, fill=None): shears about the top-left corner
// by atan(magnitude), translations by int(magnitude) pixels, rotation by `magnitude` degrees
// (zeros outside), colour factors 1 + magnitude, posterize to int(magnitude) bits, solarize
// at `magnitude`. Geometric ops write to `spare` and swap the two pointers.
void apply_op(AugOp op, double magnitude, Interpolation mode, Image*& image, Image*& spare);

}  // namespace tandem::data
