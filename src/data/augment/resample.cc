// Antialiased bilinear resampling, as torch's upsample_bilinear2d_aa computes it: weights
// per output pixel from a triangle filter widened by the downscale factor, normalised;
// a horizontal pass then a vertical one in float32; round half to even at the end.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "tandem/data/augment/resample.h"

#include "tandem/common/simd.h"

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

typedef float v4 __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));
typedef uint8_t u8x16 __attribute__((vector_size(16)));

// 4 bytes -> 4 floats: one byte shuffle (pshufb in the x86-64-v3 clone) and a conversion.
__attribute__((always_inline)) inline v4 load4(const uint8_t* p) {
  u8x16 b = {};
  __builtin_memcpy(&b, p, 4);
  // __builtin_shufflevector: GCC 12 and clang both have it (GCC's __builtin_shuffle is GCC's own).
  const u8x16 spread =
      __builtin_shufflevector(b, u8x16{}, 0, 16, 16, 16, 1, 16, 16, 16, 2, 16, 16, 16, 3, 16, 16, 16);
  v4i i;
  __builtin_memcpy(&i, &spread, 16);
  return __builtin_convertvector(i, v4);
}

// The low byte of each of 4 ints -> 4 bytes at p.
__attribute__((always_inline)) inline void store4(v4i q, uint8_t* p) {
  u8x16 b;
  __builtin_memcpy(&b, &q, 16);
  const u8x16 packed = __builtin_shufflevector(b, b, 0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  __builtin_memcpy(p, &packed, 4);
}

typedef float v8 __attribute__((vector_size(32)));
// For v8 arrays in std::vector<float> storage, which is only 16-byte aligned.
typedef float v8u __attribute__((vector_size(32), aligned(16)));

// Two source rows -> out_w pixels of 4 float lanes each (RGB and a spare lane, or gray in
// lane 0). Both rows share the taps, so they are filtered side by side in 8 lanes (one AVX
// register in the x86-64-v3 clone). K: taps per output (weights zero-padded to K), so the
// tap loop unrolls; 0: any count.
template <int C, int K>
TANDEM_VECTOR_CLONES void horizontal(const uint8_t* row_a, const uint8_t* row_b, const Taps& tx, int x0, int x1,
                                     v8u* lanes, v4* out_a, v4* out_b, int out_w) {
  for (int x = x0; x < x1; ++x) {
    v4 a, b;
    if constexpr (C == 3) {  // RGB and the next byte (Image::kPadding keeps the last read inside)
      a = load4(row_a + 3 * x);
      b = load4(row_b + 3 * x);
    } else {
      a = v4{float(row_a[x]), 0, 0, 0};
      b = v4{float(row_b[x]), 0, 0, 0};
    }
    lanes[x - x0] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7);
  }
  for (int x = x1 - x0; x < x1 - x0 + K; ++x) lanes[x] = v8u{};  // zero-weight taps read these
  for (int i = 0; i < out_w; ++i) {
    const float* w = &tx.weights[static_cast<size_t>(i) * tx.stride];
    const v8u* src = lanes + (tx.first[i] - x0);
    v8 acc = src[0] * w[0];
    const int n = K > 0 ? K : tx.count[i];
#pragma GCC unroll 8
    for (int j = 1; j < n; ++j) acc += src[j] * w[j];
    out_a[i] = __builtin_shufflevector(acc, acc, 0, 1, 2, 3);
    out_b[i] = __builtin_shufflevector(acc, acc, 4, 5, 6, 7);
  }
}

// The 4 lanes rounded (half to even), clamped and stored as C bytes at `dst`.
template <int C>
__attribute__((always_inline)) inline void store_pixel(v4 v, uint8_t* dst) {
  const v4 zero = {0, 0, 0, 0}, top = {255, 255, 255, 255}, magic = {0x1.8p23f, 0x1.8p23f, 0x1.8p23f, 0x1.8p23f};
  v = v < zero ? zero : v;
  v = v > top ? top : v;
  const v4i q = __builtin_convertvector((v + magic) - magic, v4i);  // the default rounding mode rounds
  if constexpr (C == 3) {
    store4(q, dst);  // the 4th byte is overwritten by the next pixel (or is padding)
  } else {
    *dst = static_cast<uint8_t>(q[0]);
  }
}

// One output row: the weighted sum of `rows` (K of them, zero weights past the taps; K = 0:
// n of them), two pixels (8 lanes) at a time, stored as C-channel bytes.
template <int C, int K>
TANDEM_VECTOR_CLONES void vertical(const float* const* rows, const float* w, int n, int out_w, uint8_t* dst) {
  const int taps = K > 0 ? K : n;
  int x = 0;
  for (; x + 2 <= out_w; x += 2) {
    v8u acc = *reinterpret_cast<const v8u*>(rows[0] + 4 * x) * w[0];
#pragma GCC unroll 8
    for (int j = 1; j < taps; ++j) acc += *reinterpret_cast<const v8u*>(rows[j] + 4 * x) * w[j];
    store_pixel<C>(__builtin_shufflevector(acc, acc, 0, 1, 2, 3), dst + x * C);
    store_pixel<C>(__builtin_shufflevector(acc, acc, 4, 5, 6, 7), dst + (x + 1) * C);
  }
  for (; x < out_w; ++x) {
    v4 acc = *reinterpret_cast<const v4*>(rows[0] + 4 * x) * w[0];
    for (int j = 1; j < taps; ++j) acc += *reinterpret_cast<const v4*>(rows[j] + 4 * x) * w[j];
    store_pixel<C>(acc, dst + x * C);
  }
}

// vertical<C, K> for K = the most taps any output row has.
template <int C>
void vertical_any(const float* const* rows, const Taps& ty, int i, int out_w, uint8_t* dst) {
  const float* w = &ty.weights[static_cast<size_t>(i) * ty.stride];
  switch (ty.max_count) {
    case 1:
    case 2: return vertical<C, 2>(rows, w, ty.count[i], out_w, dst);
    case 3: return vertical<C, 3>(rows, w, ty.count[i], out_w, dst);
    case 4: return vertical<C, 4>(rows, w, ty.count[i], out_w, dst);
    case 5: return vertical<C, 5>(rows, w, ty.count[i], out_w, dst);
    case 6: return vertical<C, 6>(rows, w, ty.count[i], out_w, dst);
    default: return vertical<C, 0>(rows, w, ty.count[i], out_w, dst);
  }
}

// horizontal<C, K> for K = the most taps any output has; K = 0: any count.
template <int C>
void horizontal_any(const uint8_t* a, const uint8_t* b, const Taps& tx, int x0, int x1, v8u* lanes, v4* out_a,
                    v4* out_b, int out_w) {
  switch (tx.max_count) {
    case 1:
    case 2: return horizontal<C, 2>(a, b, tx, x0, x1, lanes, out_a, out_b, out_w);
    case 3: return horizontal<C, 3>(a, b, tx, x0, x1, lanes, out_a, out_b, out_w);
    case 4: return horizontal<C, 4>(a, b, tx, x0, x1, lanes, out_a, out_b, out_w);
    case 5: return horizontal<C, 5>(a, b, tx, x0, x1, lanes, out_a, out_b, out_w);
    case 6: return horizontal<C, 6>(a, b, tx, x0, x1, lanes, out_a, out_b, out_w);
    default: return horizontal<C, 0>(a, b, tx, x0, x1, lanes, out_a, out_b, out_w);
  }
}

// Resamples with the horizontal rows in a ring: each source row is filtered once, in pairs,
// when the first output row needs it, and stays in cache while it is used.
template <int C>
void resample_rows(const ResampleSource& src, const Taps& tx, const Taps& ty, int out_height, int out_width, Image& dst) {
  const int col0 = tx.first.front(), col1 = tx.first.back() + tx.count.back();
  const int row_end = ty.first.back() + ty.count.back();
  const int ring_rows = ty.stride + 2;  // the taps of one output row, and the pair's second row
  thread_local std::vector<float> lanes;
  thread_local std::vector<v4> ring;
  lanes.resize(static_cast<size_t>(col1 - col0 + tx.stride) * 8);
  ring.resize(static_cast<size_t>(ring_rows) * out_width);
  auto slot = [&](int row) { return ring.data() + static_cast<size_t>(row % ring_rows) * out_width; };
  const float* rows[64];
  auto source_row = [&](int y) { return src.rows ? src.rows->row(y) : src.pixels + y * src.stride; };
  int next = ty.first.front();  // the next source row to filter
  for (int i = 0; i < out_height; ++i) {
    const int first = ty.first[i], n = ty.count[i];
    for (; next < first + n; next += 2) {
      const int second = std::min(next + 1, row_end - 1);  // past the end: filter the last row twice
      const uint8_t* a = source_row(next);
      horizontal_any<C>(a, source_row(second), tx, col0, col1, reinterpret_cast<v8u*>(lanes.data()), slot(next),
                        slot(next + 1), out_width);
    }
    for (int j = 0; j < ty.stride; ++j) rows[j] = reinterpret_cast<const float*>(slot(first + std::min(j, n - 1)));
    vertical_any<C>(rows, ty, i, out_width, dst.row(i));
  }
}

}  // namespace

void resample(const ResampleSource& src, int out_height, int out_width, Image& dst) {
  if (src.channels != 1 && src.channels != 3) throw std::invalid_argument("resample: channels must be 1 or 3");
  const Taps tx = compute_taps(src.x0, src.x1, src.clamp_x0, src.clamp_x1, out_width);
  const Taps ty = compute_taps(src.y0, src.y1, src.clamp_y0, src.clamp_y1, out_height);
  if (ty.stride > 64) {
    // More than about 30x down at once: first to 16x the target height, then the rest, so
    // a pipeline that fits a small image also takes a huge one (a 12,000-pixel photo).
    const int mid_height = out_height * 16;
    Image mid;
    resample(src, mid_height, out_width, mid);
    resize(mid, out_height, out_width, dst);
    return;
  }
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

}  // namespace tandem::data
