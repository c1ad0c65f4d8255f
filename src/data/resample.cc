// Antialiased bilinear resampling, as torch's upsample_bilinear2d_aa computes it: weights
// per output pixel from a triangle filter widened by the downscale factor, normalised;
// a horizontal pass then a vertical one in float32; round half to even at the end.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "tandem/data/transforms.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TANDEM_VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3")))
#else
#define TANDEM_VECTOR_CLONES
#endif

namespace tandem::data {
namespace {

// For each output index: the first source index, how many taps, and their weights.
struct Taps {
  std::vector<int> first, count;
  std::vector<float> weights;  // out * stride, row i holds output i's weights (zero after count)
  int stride = 0;
  int max_count = 0;
};

float triangle(float x) {
  x = std::fabs(x);
  return x < 1.0f ? 1.0f - x : 0.0f;
}

// torch's _compute_weights_aa (float arithmetic, the same promotions), with the source
// window starting at `b0` and taps limited to [lo, hi).
Taps compute_taps(double b0, double b1, int lo, int hi, int out) {
  const float scale = static_cast<float>(b1 - b0) / static_cast<float>(out);
  const float support = scale >= 1.0f ? scale : 1.0f;
  const float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  Taps t;
  t.stride = static_cast<int>(std::ceil(support)) * 2 + 2;
  t.first.resize(out);
  t.count.resize(out);
  t.weights.assign(static_cast<size_t>(out) * t.stride, 0.0f);
  for (int i = 0; i < out; ++i) {
    const float center = static_cast<float>(b0 + static_cast<double>(scale) * (i + 0.5));
    const int xmin = std::max(static_cast<int>(std::floor(center - support + 0.5)), lo);
    const int xmax = std::min(static_cast<int>(std::floor(center + support + 0.5)), hi);
    const int n = std::clamp(xmax - xmin, 1, t.stride);
    float* w = &t.weights[static_cast<size_t>(i) * t.stride];
    float total = 0;
    for (int j = 0; j < n; ++j) {
      const float d = static_cast<float>(j + xmin) - center;
      w[j] = triangle(static_cast<float>((static_cast<double>(d) + 0.5) * invscale));
      total += w[j];
    }
    for (int j = 0; j < n && total != 0.0f; ++j) w[j] /= total;
    t.first[i] = std::min(xmin, hi - n);
    t.count[i] = n;
    t.max_count = std::max(t.max_count, n);
  }
  return t;
}

// Rounds half to even and clamps to [0, 255] (the default rounding mode does the rounding).
inline uint8_t to_u8(float v) {
  v = std::clamp(v, 0.0f, 255.0f);
  return static_cast<uint8_t>((v + 0x1.8p23f) - 0x1.8p23f);
}

typedef float v4 __attribute__((vector_size(16)));
typedef uint8_t u8x4 __attribute__((vector_size(4)));

// One source row -> out_w pixels of 4 float lanes (RGB and a spare lane, or gray in lane 0).
// K: taps per output (weights zero-padded to K), so the tap loop unrolls.
template <int C, int K>
TANDEM_VECTOR_CLONES void horizontal(const uint8_t* row, const Taps& tx, int x0, int x1, v4* lanes, v4* out, int out_w) {
  for (int x = x0; x < x1; ++x) {
    const uint8_t* p = row + static_cast<size_t>(x) * C;
    if constexpr (C == 3) {
      u8x4 px;  // RGB and the next byte (Image::kPadding keeps the last pixel's read inside)
      __builtin_memcpy(&px, p, 4);
      lanes[x - x0] = __builtin_convertvector(px, v4);
    } else {
      lanes[x - x0] = v4{float(p[0]), 0, 0, 0};
    }
  }
  for (int x = x1 - x0; x < x1 - x0 + K; ++x) lanes[x] = v4{0, 0, 0, 0};  // zero-weight taps read these
  for (int i = 0; i < out_w; ++i) {
    const float* w = &tx.weights[static_cast<size_t>(i) * tx.stride];
    const v4* src = lanes + (tx.first[i] - x0);
    v4 acc = src[0] * w[0];
    const int n = K > 0 ? K : tx.count[i];
#pragma GCC unroll 8
    for (int j = 1; j < n; ++j) acc += src[j] * w[j];
    out[i] = acc;
  }
}

// One output row from `n` horizontal rows (each `row_floats` floats), weights `w`.
TANDEM_VECTOR_CLONES
void vertical(const float* const* rows, size_t row_floats, const float* w, int n, float* acc) {
  for (size_t k = 0; k < row_floats; ++k) acc[k] = rows[0][k] * w[0];
  for (int j = 1; j < n; ++j) {
    const float* r = rows[j];
    for (size_t k = 0; k < row_floats; ++k) acc[k] += r[k] * w[j];
  }
}

typedef int v4i __attribute__((vector_size(16)));

// The 4-lane row rounded (half to even), clamped, and stored as C-channel bytes.
template <int C>
TANDEM_VECTOR_CLONES void store_row(const float* acc, int out_w, uint8_t* dst) {
  const v4 zero = {0, 0, 0, 0}, top = {255, 255, 255, 255}, magic = {0x1.8p23f, 0x1.8p23f, 0x1.8p23f, 0x1.8p23f};
  for (int x = 0; x < out_w; ++x) {
    v4 v;
    __builtin_memcpy(&v, acc + 4 * x, sizeof v);
    v = v < zero ? zero : v;
    v = v > top ? top : v;
    const v4i q = __builtin_convertvector((v + magic) - magic, v4i);
    if constexpr (C == 3) {
      const u8x4 bytes = __builtin_convertvector(q, u8x4);  // the 4th byte is overwritten next
      __builtin_memcpy(dst + 3 * x, &bytes, 4);
    } else {
      dst[x] = static_cast<uint8_t>(q[0]);
    }
  }
}

// horizontal<C, K> for K = the most taps any output has; K = 0: any count.
template <int C>
void horizontal_any(const uint8_t* row, const Taps& tx, int x0, int x1, v4* lanes, v4* out, int out_w) {
  switch (tx.max_count) {
    case 1:
    case 2: return horizontal<C, 2>(row, tx, x0, x1, lanes, out, out_w);
    case 3: return horizontal<C, 3>(row, tx, x0, x1, lanes, out, out_w);
    case 4: return horizontal<C, 4>(row, tx, x0, x1, lanes, out, out_w);
    case 5: return horizontal<C, 5>(row, tx, x0, x1, lanes, out, out_w);
    case 6: return horizontal<C, 6>(row, tx, x0, x1, lanes, out, out_w);
    default: return horizontal<C, 0>(row, tx, x0, x1, lanes, out, out_w);
  }
}

// Resamples with the horizontal rows in a ring of `ty.stride` rows: each source row is
// filtered once, when the first output row needs it, and stays in cache while it is used.
template <int C>
void resample_rows(const ResampleSource& src, const Taps& tx, const Taps& ty, int out_height, int out_width, Image& dst) {
  const int col0 = tx.first.front(), col1 = tx.first.back() + tx.count.back();
  const size_t row_floats = static_cast<size_t>(out_width) * 4;
  thread_local std::vector<v4> lanes, ring;
  thread_local std::vector<float> acc;
  lanes.resize(col1 - col0 + tx.stride);
  ring.resize(static_cast<size_t>(ty.stride) * out_width);
  acc.resize(row_floats);
  const float* rows[64];
  int next = ty.first.front();  // the next source row to filter
  for (int i = 0; i < out_height; ++i) {
    const int first = ty.first[i], n = ty.count[i];
    for (; next < first + n; ++next) {
      v4* slot = ring.data() + static_cast<size_t>(next % ty.stride) * out_width;
      horizontal_any<C>(src.pixels + next * src.stride, tx, col0, col1, lanes.data(), slot, out_width);
    }
    for (int j = 0; j < n; ++j) rows[j] = reinterpret_cast<const float*>(ring.data() + static_cast<size_t>((first + j) % ty.stride) * out_width);
    vertical(rows, row_floats, &ty.weights[static_cast<size_t>(i) * ty.stride], n, acc.data());
    store_row<C>(acc.data(), out_width, dst.row(i));
  }
}

}  // namespace

void resample(const ResampleSource& src, int out_height, int out_width, Image& dst) {
  if (src.channels != 1 && src.channels != 3) throw std::invalid_argument("resample: channels must be 1 or 3");
  const Taps tx = compute_taps(src.x0, src.x1, src.clamp_x0, src.clamp_x1, out_width);
  const Taps ty = compute_taps(src.y0, src.y1, src.clamp_y0, src.clamp_y1, out_height);
  if (ty.stride > 64) throw std::invalid_argument("resample: downscaling by more than 30x at once");
  dst.reshape(out_height, out_width, src.channels);
  if (src.channels == 3) resample_rows<3>(src, tx, ty, out_height, out_width, dst);
  else resample_rows<1>(src, tx, ty, out_height, out_width, dst);
}

void resize(const Image& src, int out_height, int out_width, Image& dst) {
  ResampleSource s;
  s.pixels = src.pixels.data();
  s.stride = src.stride();
  s.channels = src.channels;
  s.x1 = s.clamp_x1 = src.width;
  s.y1 = s.clamp_y1 = src.height;
  resample(s, out_height, out_width, dst);
}

std::pair<int, int> resize_smaller_edge(int height, int width, int size) {
  const bool portrait = width <= height;
  const int shorter = portrait ? width : height, longer = portrait ? height : width;
  const int new_long = static_cast<int>(static_cast<double>(size) * longer / shorter);
  return portrait ? std::pair{new_long, size} : std::pair{size, new_long};
}

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
