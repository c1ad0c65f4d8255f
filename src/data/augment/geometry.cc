// Geometric transforms: torchvision's crop box draws, crops, flips, rotation and affine
// sampling. Float32 as torch evaluates it: one rounding per operation, no fused multiply-add.
#pragma GCC optimize("fp-contract=off")
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "tandem/data/augment/geometry.h"

#include "tandem/common/error.h"
#include "tandem/common/simd.h"

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

void vflip(Image& image) {
  const size_t row = static_cast<size_t>(image.width) * image.channels;
  for (int a = 0, b = image.height - 1; a < b; ++a, --b) std::swap_ranges(image.row(a), image.row(a) + row, image.row(b));
}

namespace {

// The source index of padded position `i` (the image's pixel i - before), as F.pad takes
// it: -1 for the constant fill; edge clamps; reflect mirrors about the edge pixel,
// symmetric about the edge (numpy's names, torchvision's modes).
int padded_source(int i, int before, int size, PadMode mode) {
  int x = i - before;
  for (int guard = 0; (x < 0 || x >= size) && guard < 64; ++guard) {
    if (mode == PadMode::kConstant) return -1;
    if (mode == PadMode::kEdge) return std::clamp(x, 0, size - 1);
    const int shift = mode == PadMode::kReflect ? 0 : 1;
    x = x < 0 ? -x - shift : 2 * size - 2 + shift - x;
    if (size == 1) x = 0;
  }
  return std::clamp(x, 0, size - 1);
}

}  // namespace

void random_crop(const Image& src, const RandomCropOptions& o, Rng& rng, Image& dst) {
  int left = o.pad[0], top = o.pad[1];
  int padded_w = src.width + o.pad[0] + o.pad[2], padded_h = src.height + o.pad[1] + o.pad[3];
  if (o.pad_if_needed && padded_w < o.width) {  // torchvision pads the shortfall on both sides
    left += o.width - padded_w;
    padded_w += 2 * (o.width - padded_w);
  }
  if (o.pad_if_needed && padded_h < o.height) {
    top += o.height - padded_h;
    padded_h += 2 * (o.height - padded_h);
  }
  if (padded_h < o.height || padded_w < o.width) {
    throw DataError("random_crop(" + std::to_string(o.height) + ", " + std::to_string(o.width) + ") of a " +
                    std::to_string(padded_h) + "x" + std::to_string(padded_w) + " image (padded): give it padding or "
                    "pad_if_needed=1, or crop smaller");
  }
  int y0 = 0, x0 = 0;
  if (padded_h != o.height || padded_w != o.width) {
    y0 = static_cast<int>(rng.below(static_cast<uint64_t>(padded_h - o.height) + 1));
    x0 = static_cast<int>(rng.below(static_cast<uint64_t>(padded_w - o.width) + 1));
  }
  const int c = src.channels;
  dst.reshape(o.height, o.width, c);
  std::vector<int> xs(static_cast<size_t>(o.width));
  for (int x = 0; x < o.width; ++x) xs[static_cast<size_t>(x)] = padded_source(x0 + x, left, src.width, o.mode);
  for (int y = 0; y < o.height; ++y) {
    const int sy = padded_source(y0 + y, top, src.height, o.mode);
    uint8_t* out = dst.row(y);
    for (int x = 0; x < o.width; ++x) {
      const int sx = xs[static_cast<size_t>(x)];
      for (int ch = 0; ch < c; ++ch) out[x * c + ch] = sy < 0 || sx < 0 ? o.fill : src.row(sy)[sx * c + ch];
    }
  }
}

void rotate_nearest(const Image& src, double angle_degrees, Image& dst) {
  // F.rotate: the inverse matrix of affine(-angle) about the centre.
  AffineParams p;
  p.angle = -angle_degrees;
  affine_sample(src, inverse_affine_matrix(p), Interpolation::kNearest, dst);
}

std::array<double, 6> inverse_affine_matrix(const AffineParams& p) {
  constexpr double kDegToRad = M_PI / 180.0;  // Python's math.radians multiplies by this
  const double rot = p.angle * kDegToRad, sx = p.shear_x * kDegToRad, sy = p.shear_y * kDegToRad;
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m = {d, -b, 0.0, -c, a, 0.0};
  for (double& v : m) v /= p.scale;
  const double cx = p.center_x, cy = p.center_y, tx = p.translate_x, ty = p.translate_y;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  return m;
}

namespace {

// The float32 grid of _gen_affine_grid and grid_sample's unnormalisation.
struct AffineGrid {
  float a0, a1, a2, b0, b1, b2;  // theta.T / (w/2, h/2)
  float w, h;

  AffineGrid(const std::array<double, 6>& m, int width, int height)
      : w(static_cast<float>(width)), h(static_cast<float>(height)) {
    const float hw = 0.5f * w, hh = 0.5f * h;
    a0 = static_cast<float>(m[0]) / hw, a1 = static_cast<float>(m[1]) / hw, a2 = static_cast<float>(m[2]) / hw;
    b0 = static_cast<float>(m[3]) / hh, b1 = static_cast<float>(m[4]) / hh, b2 = static_cast<float>(m[5]) / hh;
  }
};

// Row y's source coordinates (pixel units, align_corners=False): the grid point
// (gx * a0 + gy * a1) + a2 of each output pixel, then ((n + 1) * size - 1) / 2, in float32
// in torch's order, in a loop the compiler vectorises (the same operations, so the same values).
TANDEM_VECTOR_CLONES void source_row(const AffineGrid& grid, int y, int width, float* sx, float* sy) {
  const AffineGrid g = grid;  // locals: sx and sy cannot alias them
  const float gy = -g.h * 0.5f + 0.5f + static_cast<float>(y), gx0 = -g.w * 0.5f + 0.5f;
  const float ya = gy * g.a1, yb = gy * g.b1;
  for (int x = 0; x < width; ++x) {
    const float gx = gx0 + static_cast<float>(x);
    const float nx = gx * g.a0 + ya + g.a2, ny = gx * g.b0 + yb + g.b2;
    sx[x] = ((nx + 1.0f) * g.w - 1.0f) / 2.0f;
    sy[x] = ((ny + 1.0f) * g.h - 1.0f) / 2.0f;
  }
}

// Nearest: each pixel's source pixel index (round half to even), -1 outside.
TANDEM_VECTOR_CLONES void nearest_row(const float* sx, const float* sy, int n, int width, int height, int* index) {
  const float w = static_cast<float>(width), h = static_cast<float>(height);
  for (int x = 0; x < n; ++x) {
    const int ix = static_cast<int>(std::clamp(std::nearbyint(sx[x]), -1.0f, w));
    const int iy = static_cast<int>(std::clamp(std::nearbyint(sy[x]), -1.0f, h));
    index[x] = ix >= 0 && ix < width && iy >= 0 && iy < height ? iy * width + ix : -1;
  }
}

// Bilinear: each pixel's top-left tap (floor, clamped to [-2, size] before the conversion)
// and its fractions east and south.
TANDEM_VECTOR_CLONES void bilinear_row(float* sx, float* sy, int n, int width, int height, int* x0, int* y0) {
  const float w = static_cast<float>(width), h = static_cast<float>(height);
  for (int x = 0; x < n; ++x) {
    const float fx = std::floor(sx[x]), fy = std::floor(sy[x]);
    sx[x] -= fx;
    sy[x] -= fy;
    x0[x] = static_cast<int>(std::clamp(fx, -2.0f, w));
    y0[x] = static_cast<int>(std::clamp(fy, -2.0f, h));
  }
}

// Round half to even without a libm call: adding and subtracting 1.5 * 2^23 leaves an
// integer in the default rounding mode. Exact for |v| < 2^22; larger values come back
// large (they are clamped or outside the image either way).
inline float round_even(float v) {
  constexpr float kMagic = 0x1.8p23f;
  return (v + kMagic) - kMagic;
}

struct RowScratch {
  std::vector<float> sx, sy;
  std::vector<int> a, b;
  explicit RowScratch(int width) : sx(width), sy(width), a(width), b(width) {}
};

void sample_nearest(const Image& src, const AffineGrid& g, Image& dst) {
  const int w = src.width, h = src.height, c = src.channels;
  RowScratch r(w);
  for (int y = 0; y < h; ++y) {
    source_row(g, y, w, r.sx.data(), r.sy.data());
    nearest_row(r.sx.data(), r.sy.data(), w, w, h, r.a.data());
    uint8_t* out = dst.row(y);
    for (int x = 0; x < w; ++x) {
      const int i = r.a[x];
      for (int ch = 0; ch < c; ++ch) out[x * c + ch] = i >= 0 ? src.pixels[static_cast<size_t>(i) * c + ch] : 0;
    }
  }
}

// One output pixel of grid_sample's bilinear kernel: (nw * v_nw + ne * v_ne) + sw * v_sw +
// se * v_se, zeros outside, then torch.round and the cast back to uint8. Inside the image
// the four taps are read directly; at the border through `at` (0 outside: adding 0 changes
// no sum).
inline void bilinear_pixel(const Image& src, int ix, int iy, float ew, float ns, uint8_t* out) {
  const int w = src.width, h = src.height, c = src.channels;
  const size_t stride = src.stride();
  const float we = 1.0f - ew, sn = 1.0f - ns;
  const float nw = sn * we, ne = sn * ew, sw = ns * we, se = ns * ew;
  auto at = [&](int x, int y, int ch) -> float {
    return x >= 0 && x < w && y >= 0 && y < h ? static_cast<float>(src.row(y)[x * c + ch]) : 0.0f;
  };
  const bool inside = ix >= 0 && ix + 1 < w && iy >= 0 && iy + 1 < h;
  const uint8_t* p = inside ? src.row(iy) + ix * c : nullptr;
  for (int ch = 0; ch < c; ++ch) {
    const float v = inside ? float(p[ch]) * nw + float(p[c + ch]) * ne + float(p[stride + ch]) * sw +
                                 float(p[stride + c + ch]) * se
                           : at(ix, iy, ch) * nw + at(ix + 1, iy, ch) * ne + at(ix, iy + 1, ch) * sw +
                                 at(ix + 1, iy + 1, ch) * se;
    float r = round_even(v);  // a convex combination: in [0, 255] but for the last ulp
    r = r < 0.0f ? 0.0f : r;  // (minss/maxss: no branches)
    r = r > 255.0f ? 255.0f : r;
    out[ch] = static_cast<uint8_t>(r);
  }
}

void sample_bilinear(const Image& src, const AffineGrid& g, Image& dst) {
  const int w = src.width, h = src.height, c = src.channels;
  RowScratch r(w);
  for (int y = 0; y < h; ++y) {
    source_row(g, y, w, r.sx.data(), r.sy.data());
    bilinear_row(r.sx.data(), r.sy.data(), w, w, h, r.a.data(), r.b.data());
    uint8_t* out = dst.row(y);
    for (int x = 0; x < w; ++x) bilinear_pixel(src, r.a[x], r.b[x], r.sx[x], r.sy[x], out + x * c);
  }
}

}  // namespace

void affine_sample(const Image& src, const std::array<double, 6>& inverse, Interpolation mode, Image& dst) {
  dst.reshape(src.height, src.width, src.channels);
  const AffineGrid grid(inverse, src.width, src.height);
  if (mode == Interpolation::kNearest) sample_nearest(src, grid, dst);
  else sample_bilinear(src, grid, dst);
}

}  // namespace tandem::data
