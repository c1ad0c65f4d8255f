// The AutoAugment family's operations, transcribed from torchvision's tensor code for uint8
// images: float32 where torch computes in float32 (one rounding per operation, no fused
// multiply-add), integers where it uses integers, truncation where it casts to uint8.
#pragma GCC optimize("fp-contract=off")

#include "tandem/data/augment/autoaugment_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tandem/data/augment/color.h"

namespace tandem::data {
namespace {

// Every value of every channel through `lut[channel]`.
void apply_luts(Image& image, const std::array<std::array<uint8_t, 256>, 3>& lut) {
  const size_t n = static_cast<size_t>(image.height) * image.width;
  const int c = image.channels;
  uint8_t* p = image.pixels.data();
  if (c == 1) {
    for (size_t i = 0; i < n; ++i) p[i] = lut[0][p[i]];
    return;
  }
  for (size_t i = 0; i < n; ++i, p += 3) {
    p[0] = lut[0][p[0]];
    p[1] = lut[1][p[1]];
    p[2] = lut[2][p[2]];
  }
}

// The same table for every channel.
void apply_lut(Image& image, const std::array<uint8_t, 256>& lut) { apply_luts(image, {lut, lut, lut}); }

std::array<uint64_t, 256> histogram(const Image& image, int channel) {
  std::array<uint64_t, 256> hist{};
  const size_t n = static_cast<size_t>(image.height) * image.width;
  const int c = image.channels;
  for (size_t i = 0; i < n; ++i) ++hist[image.pixels[i * c + channel]];
  return hist;
}

// _scale_channel: the equalising LUT of one channel's histogram (identity when step is 0).
std::array<uint8_t, 256> equalize_lut(const std::array<uint64_t, 256>& hist) {
  std::array<uint8_t, 256> lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v);
  int last = 255;
  while (last > 0 && hist[last] == 0) --last;
  uint64_t below_last = 0;  // nonzero_hist[:-1].sum(): every count but the highest value's
  for (int v = 0; v < last; ++v) below_last += hist[v];
  const uint64_t step = below_last / 255;
  if (step == 0) return lut;
  uint64_t cumulative = 0;
  lut[0] = 0;
  for (int v = 1; v < 256; ++v) {
    cumulative += hist[v - 1];
    lut[v] = static_cast<uint8_t>(std::min<uint64_t>((cumulative + step / 2) / step, 255));
  }
  return lut;
}

// The 3x3 [1 1 1; 1 5 1; 1 1 1] / 13 smoothing of one interior pixel, rounded. The sum / 13
// is never a half, so float32's rounding error cannot move it across one: integers decide.
inline uint8_t smoothed(const uint8_t* p, size_t stride, int c) {
  const uint8_t* up = p - stride;
  const uint8_t* down = p + stride;
  const int sum = up[-c] + up[0] + up[c] + p[-c] + 5 * p[0] + p[c] + down[-c] + down[0] + down[c];
  return static_cast<uint8_t>((2 * sum + 13) / 26);
}

// _blend(row, degenerate, factor) for one row: float32, clamp, truncate.
void blend_row(uint8_t* row, const uint8_t* degenerate, size_t n, float keep, float mix) {
  for (size_t i = 0; i < n; ++i) {
    const float v = keep * static_cast<float>(row[i]) + mix * static_cast<float>(degenerate[i]);
    row[i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
  }
}

}  // namespace

const char* aug_op_name(AugOp op) {
  static constexpr const char* kNames[] = {"Identity",   "ShearX",    "ShearY",    "TranslateX", "TranslateY",
                                           "Rotate",     "Brightness", "Color",    "Contrast",   "Sharpness",
                                           "Posterize",  "Solarize",  "AutoContrast", "Equalize", "Invert"};
  return kNames[static_cast<int>(op)];
}

void adjust_sharpness(Image& image, double factor) {
  const int h = image.height, w = image.width, c = image.channels;
  if (h <= 2 || w <= 2) return;
  const size_t stride = image.stride();
  const float keep = static_cast<float>(factor), mix = static_cast<float>(1.0 - factor);
  thread_local std::vector<uint8_t> above, current;  // the degenerate rows y - 1 and y
  above.assign(image.row(0), image.row(0) + stride);
  current.resize(stride);
  for (int y = 1; y < h - 1; ++y) {
    const uint8_t* src = image.row(y);
    current.assign(src, src + stride);
    for (size_t i = c; i < stride - c; ++i) current[i] = smoothed(src + i, stride, c);
    blend_row(image.row(y - 1), above.data(), stride, keep, mix);  // row y - 1 is no longer read
    std::swap(above, current);
  }
  blend_row(image.row(h - 2), above.data(), stride, keep, mix);
  current.assign(image.row(h - 1), image.row(h - 1) + stride);  // the last row is its own degenerate
  blend_row(image.row(h - 1), current.data(), stride, keep, mix);
}

void posterize(Image& image, int bits) {
  if (bits < 0 || bits > 8) throw std::invalid_argument("posterize: bits must be in [0, 8]");
  const uint8_t mask = static_cast<uint8_t>((0xFF << (8 - bits)) & 0xFF);
  std::array<uint8_t, 256> lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(v & mask);
  apply_lut(image, lut);
}

void solarize(Image& image, double threshold) {
  const float t = static_cast<float>(threshold);
  std::array<uint8_t, 256> lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(static_cast<float>(v) >= t ? 255 - v : v);
  apply_lut(image, lut);
}

void invert(Image& image) {
  std::array<uint8_t, 256> lut;
  for (int v = 0; v < 256; ++v) lut[v] = static_cast<uint8_t>(255 - v);
  apply_lut(image, lut);
}

void autocontrast(Image& image) {
  std::array<std::array<uint8_t, 256>, 3> lut;
  for (int ch = 0; ch < image.channels; ++ch) {
    const auto hist = histogram(image, ch);
    int lo = 0, hi = 255;
    while (lo < 255 && hist[lo] == 0) ++lo;
    while (hi > 0 && hist[hi] == 0) --hi;
    const bool flat = hi <= lo;  // torch: scale is inf, so minimum 0 and scale 1
    const float minimum = flat ? 0.0f : static_cast<float>(lo);
    const float scale = flat ? 1.0f : 255.0f / (static_cast<float>(hi) - static_cast<float>(lo));
    for (int v = 0; v < 256; ++v) {
      const float out = (static_cast<float>(v) - minimum) * scale;
      lut[ch][v] = static_cast<uint8_t>(std::clamp(out, 0.0f, 255.0f));
    }
  }
  apply_luts(image, lut);
}

void equalize(Image& image) {
  std::array<std::array<uint8_t, 256>, 3> lut;
  for (int ch = 0; ch < image.channels; ++ch) lut[ch] = equalize_lut(histogram(image, ch));
  apply_luts(image, lut);
}

namespace {

// F.affine(img, angle=0, translate, scale=1, shear) as _apply_op calls it.
void affine_op(AugOp op, double magnitude, Interpolation mode, Image*& image, Image*& spare) {
  constexpr double kRadToDeg = 180.0 / M_PI;  // Python's math.degrees multiplies by this
  const Image& img = *image;
  AffineParams p;
  if (op == AugOp::kShearX || op == AugOp::kShearY) {
    const double shear = std::atan(magnitude) * kRadToDeg;
    (op == AugOp::kShearX ? p.shear_x : p.shear_y) = shear;
    p.center_x = 0 - img.width * 0.5;  // center=[0, 0]: the top-left corner
    p.center_y = 0 - img.height * 0.5;
  } else if (op == AugOp::kTranslateX) {
    p.translate_x = std::trunc(magnitude);
  } else if (op == AugOp::kTranslateY) {
    p.translate_y = std::trunc(magnitude);
  } else {  // Rotate: F.rotate passes -angle to the matrix
    p.angle = -magnitude;
  }
  affine_sample(img, inverse_affine_matrix(p), mode, *spare);
  std::swap(image, spare);
}

}  // namespace

void apply_op(AugOp op, double magnitude, Interpolation mode, Image*& image, Image*& spare) {
  Image& img = *image;
  switch (op) {
    case AugOp::kIdentity: return;
    case AugOp::kShearX:
    case AugOp::kShearY:
    case AugOp::kTranslateX:
    case AugOp::kTranslateY:
    case AugOp::kRotate: return affine_op(op, magnitude, mode, image, spare);
    case AugOp::kBrightness: return adjust_brightness(img, 1.0 + magnitude);
    case AugOp::kColor: return adjust_saturation(img, 1.0 + magnitude);
    case AugOp::kContrast: return adjust_contrast(img, 1.0 + magnitude);
    case AugOp::kSharpness: return adjust_sharpness(img, 1.0 + magnitude);
    case AugOp::kPosterize: return posterize(img, static_cast<int>(magnitude));
    case AugOp::kSolarize: return solarize(img, magnitude);
    case AugOp::kAutoContrast: return autocontrast(img);
    case AugOp::kEqualize: return equalize(img);
    case AugOp::kInvert: return invert(img);
  }
}

}  // namespace tandem::data
