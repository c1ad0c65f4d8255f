// Geometric transforms: torchvision's crop box draws, crops, flips and rotation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "tandem/data/augment/geometry.h"

namespace tandem::data {
namespace {

// Python's round(): half to even (the default floating-point rounding mode).
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

CropBox fallback_box(int height, int width, const RandomResizedCropParams& p) {
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < p.ratio_min) {
    h = round_half_even(w / p.ratio_min);
  } else if (in_ratio > p.ratio_max) {
    w = round_half_even(h * p.ratio_max);
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

}  // namespace

CropBox random_resized_crop_box(int height, int width, const RandomResizedCropParams& p, Rng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_min = std::log(p.ratio_min), log_max = std::log(p.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(p.scale_min, p.scale_max);
    const double aspect = std::exp(rng.uniform(log_min, log_max));
    const int w = round_half_even(std::sqrt(target_area * aspect));
    const int h = round_half_even(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = static_cast<int>(rng.below(static_cast<uint64_t>(height - h + 1)));
      const int left = static_cast<int>(rng.below(static_cast<uint64_t>(width - w + 1)));
      return {top, left, h, w};
    }
  }
  return fallback_box(height, width, p);
}

void crop(const Image& src, const CropBox& box, Image& dst) {
  const int c = src.channels;
  dst.reshape(box.height, box.width, c);
  const int x0 = std::clamp(box.left, 0, src.width), x1 = std::clamp(box.left + box.width, 0, src.width);
  for (int y = 0; y < box.height; ++y) {
    uint8_t* out = dst.row(y);
    const int sy = box.top + y;
    if (sy < 0 || sy >= src.height || x0 >= x1) {
      std::memset(out, 0, dst.stride());
      continue;
    }
    const size_t before = static_cast<size_t>(x0 - box.left) * c, inside = static_cast<size_t>(x1 - x0) * c;
    std::memset(out, 0, before);
    std::memcpy(out + before, src.row(sy) + static_cast<size_t>(x0) * c, inside);
    std::memset(out + before + inside, 0, dst.stride() - before - inside);
  }
}

void center_crop(const Image& src, int height, int width, Image& dst) {
  // torchvision pads to at least the crop first: (crop - size) // 2 before, the rest after.
  const int pad_top = height > src.height ? (height - src.height) / 2 : 0;
  const int pad_left = width > src.width ? (width - src.width) / 2 : 0;
  const int padded_h = std::max(src.height, height), padded_w = std::max(src.width, width);
  const int top = round_half_even((padded_h - height) / 2.0) - pad_top;
  const int left = round_half_even((padded_w - width) / 2.0) - pad_left;
  crop(src, {top, left, height, width}, dst);
}

namespace {

template <int C>
void hflip_rows(Image& image) {
  const int w = image.width;
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = image.row(y);
    for (int a = 0, b = w - 1; a < b; ++a, --b)
      for (int ch = 0; ch < C; ++ch) std::swap(row[a * C + ch], row[b * C + ch]);
  }
}

}  // namespace

void hflip(Image& image) {
  if (image.channels == 3) hflip_rows<3>(image);
  else if (image.channels == 1) hflip_rows<1>(image);
  else throw std::invalid_argument("hflip: channels must be 1 or 3");
}

void rotate_nearest(const Image& src, double angle_degrees, Image& dst) {
  // torchvision: inverse matrix [cos, sin; -sin, cos] of radians(-angle), a float32 grid of
  // pixel centres about the image centre, normalised by (w/2, h/2), grid_sample(nearest,
  // align_corners=False) with round half to even, zeros outside.
  const double rot = -angle_degrees * M_PI / 180.0;
  const float m0 = static_cast<float>(std::cos(rot)), m1 = static_cast<float>(std::sin(rot));
  const float m3 = -m1, m4 = m0;
  const int w = src.width, h = src.height, c = src.channels;
  const float hw = 0.5f * static_cast<float>(w), hh = 0.5f * static_cast<float>(h);
  const float a0 = m0 / hw, a1 = m1 / hw, b0 = m3 / hh, b1 = m4 / hh;
  dst.reshape(h, w, c);
  for (int y = 0; y < h; ++y) {
    const float gy = -static_cast<float>(h) * 0.5f + 0.5f + static_cast<float>(y);
    uint8_t* out = dst.row(y);
    for (int x = 0; x < w; ++x) {
      const float gx = -static_cast<float>(w) * 0.5f + 0.5f + static_cast<float>(x);
      const float nx = gx * a0 + gy * a1, ny = gx * b0 + gy * b1;
      const float ix = std::nearbyint(((nx + 1.0f) * static_cast<float>(w) - 1.0f) / 2.0f);
      const float iy = std::nearbyint(((ny + 1.0f) * static_cast<float>(h) - 1.0f) / 2.0f);
      const bool inside = ix >= 0 && ix < w && iy >= 0 && iy < h;
      for (int ch = 0; ch < c; ++ch) {
        out[x * c + ch] = inside ? src.row(static_cast<int>(iy))[static_cast<int>(ix) * c + ch] : 0;
      }
    }
  }
}

}  // namespace tandem::data
