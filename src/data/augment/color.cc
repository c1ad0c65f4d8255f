// ColorJitter's adjustments, transcribed from torchvision's tensor code for uint8 images:
// every product and sum in float32 as torch evaluates it (one rounding each, no fused
// multiply-add), then clamp and truncate to uint8 as Tensor.to(torch.uint8) does.
#pragma GCC optimize("fp-contract=off")

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tandem/common/simd.h"
#include "tandem/data/augment/color.h"

namespace tandem::data {
namespace {

inline uint8_t truncate_u8(float v) { return static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f)); }

// _blend(img, constant, ratio): each output byte depends on its input byte alone, so one
// table of the 256 results, each computed as blend() computes it, gives the same bytes.
void blend_constant(Image& image, double ratio, float constant) {
  const float keep = static_cast<float>(ratio), mix = static_cast<float>(1.0 - ratio);
  const float o = mix * constant;
  uint8_t table[256];
  for (int x = 0; x < 256; ++x) table[x] = truncate_u8(keep * static_cast<float>(x) + o);
  const size_t n = static_cast<size_t>(image.height) * image.width * image.channels;
  for (size_t i = 0; i < n; ++i) image.pixels[i] = table[image.pixels[i]];
}

// _blend(img, gray, ratio): keep * x + mix * gray(pixel), each product and sum in float32
// as torch takes them. Pixels go through in runs of kRun, their channels apart, so that
// the arithmetic runs on whole vectors: the same operations, the same bytes.
TANDEM_VECTOR_CLONES void blend_gray(Image& image, double ratio) {
  constexpr size_t kRun = 64;
  const float keep = static_cast<float>(ratio), mix = static_cast<float>(1.0 - ratio);
  const size_t n = static_cast<size_t>(image.height) * image.width;
  float r[kRun], g[kRun], b[kRun], o[kRun];
  for (size_t start = 0; start < n; start += kRun) {
    const size_t m = std::min(kRun, n - start);
    uint8_t* p = &image.pixels[start * 3];
    for (size_t k = 0; k < m; ++k) {
      r[k] = static_cast<float>(p[3 * k]);
      g[k] = static_cast<float>(p[3 * k + 1]);
      b[k] = static_cast<float>(p[3 * k + 2]);
    }
    for (size_t k = 0; k < m; ++k) {
      const float level = static_cast<float>(static_cast<int>(0.2989f * r[k] + 0.587f * g[k] + 0.114f * b[k]));
      o[k] = mix * level;
      r[k] = std::clamp(keep * r[k] + o[k], 0.0f, 255.0f);
      g[k] = std::clamp(keep * g[k] + o[k], 0.0f, 255.0f);
      b[k] = std::clamp(keep * b[k] + o[k], 0.0f, 255.0f);
    }
    for (size_t k = 0; k < m; ++k) {
      p[3 * k] = static_cast<uint8_t>(static_cast<int>(r[k]));
      p[3 * k + 1] = static_cast<uint8_t>(static_cast<int>(g[k]));
      p[3 * k + 2] = static_cast<uint8_t>(static_cast<int>(b[k]));
    }
  }
}

struct Hsv {
  float h, s, v;
};

Hsv rgb_to_hsv(float r, float g, float b) {
  const float maxc = std::max({r, g, b}), minc = std::min({r, g, b});
  const bool eqc = maxc == minc;
  const float cr = maxc - minc;
  const float s = cr / (eqc ? 1.0f : maxc);
  const float div = eqc ? 1.0f : cr;
  const float rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
  float h;
  if (maxc == r) h = bc - gc;
  else if (maxc == g) h = 2.0f + rc - bc;
  else h = 4.0f + gc - rc;
  h = std::fmod(h / 6.0f + 1.0f, 1.0f);
  return {h, s, maxc};
}

void hsv_to_rgb(Hsv x, float* rgb) {
  const float fi = std::floor(x.h * 6.0f);
  const float f = x.h * 6.0f - fi;
  const int i = ((static_cast<int>(fi) % 6) + 6) % 6;
  const float p = std::clamp(x.v * (1.0f - x.s), 0.0f, 1.0f);
  const float q = std::clamp(x.v * (1.0f - x.s * f), 0.0f, 1.0f);
  const float t = std::clamp(x.v * (1.0f - x.s * (1.0f - f)), 0.0f, 1.0f);
  const float table[6][3] = {{x.v, t, p}, {q, x.v, p}, {p, x.v, t}, {p, q, x.v}, {t, p, x.v}, {x.v, p, q}};
  for (int c = 0; c < 3; ++c) rgb[c] = table[i][c];
}

}  // namespace

void adjust_brightness(Image& image, double factor) { blend_constant(image, factor, 0.0f); }

// The sum of every pixel's grey level: rgb_to_grayscale on uint8, (0.2989 r + 0.587 g +
// 0.114 b) in float32, truncated.
TANDEM_VECTOR_CLONES uint64_t gray_sum(const uint8_t* pixels, size_t n) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &pixels[i * 3];
    sum += static_cast<uint32_t>(static_cast<int>(0.2989f * static_cast<float>(p[0]) +
                                                  0.587f * static_cast<float>(p[1]) + 0.114f * static_cast<float>(p[2])));
  }
  return sum;
}

void adjust_contrast(Image& image, double factor) {
  const size_t n = static_cast<size_t>(image.height) * image.width;
  uint64_t sum = 0;
  if (image.channels == 3) {
    sum = gray_sum(image.pixels.data(), n);
  } else {
    for (size_t i = 0; i < n; ++i) sum += image.pixels[i];
  }
  const float mean = static_cast<float>(sum) / static_cast<float>(n);
  blend_constant(image, factor, mean);
}

void grayscale_rgb(Image& image) {
  if (image.channels != 3) return;
  const size_t n = static_cast<size_t>(image.height) * image.width;
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = &image.pixels[i * 3];
    p[0] = p[1] = p[2] = static_cast<uint8_t>(static_cast<int>(
        0.2989f * static_cast<float>(p[0]) + 0.587f * static_cast<float>(p[1]) + 0.114f * static_cast<float>(p[2])));
  }
}

void adjust_saturation(Image& image, double factor) {
  if (image.channels != 3) return;  // torchvision (like PIL) leaves gray images alone
  blend_gray(image, factor);
}

void adjust_hue(Image& image, double hue_factor) {
  if (image.channels != 3) return;
  const size_t n = static_cast<size_t>(image.height) * image.width;
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = &image.pixels[i * 3];
    Hsv hsv = rgb_to_hsv(p[0] / 255.0f, p[1] / 255.0f, p[2] / 255.0f);
    const float shifted = hsv.h + static_cast<float>(hue_factor);
    hsv.h = shifted - std::floor(shifted / 1.0f) * 1.0f;  // torch's % : the sign of the divisor
    float rgb[3];
    hsv_to_rgb(hsv, rgb);
    for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(std::clamp(rgb[c] * 255.0f, 0.0f, 255.0f));
  }
}

}  // namespace tandem::data
