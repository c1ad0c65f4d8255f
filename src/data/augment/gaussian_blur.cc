#include "tandem/data/augment/gaussian_blur.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tandem/common/simd.h"

namespace tandem::data {

std::vector<float> gaussian_kernel1d(int kernel_size, float sigma) {
  // Same arithmetic as torchvision: linspace(-half, half) in float32, exp, normalise.
  std::vector<float> k(kernel_size);
  const float half = (kernel_size - 1) * 0.5f;
  const float step = kernel_size > 1 ? (2 * half) / static_cast<float>(kernel_size - 1) : 0.f;
  float sum = 0;
  for (int i = 0; i < kernel_size; ++i) {
    const float x = (-half + step * static_cast<float>(i)) / sigma;
    k[i] = std::exp(-0.5f * x * x);
    sum += k[i];
  }
  for (float& v : k) v /= sum;
  return k;
}

namespace {

// torch's "reflect" padding: mirror without repeating the edge sample.
inline int reflect(int i, int n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

// Eight lanes: AVX in the Haswell clone, two SSE registers in the default one.
typedef float Lanes __attribute__((vector_size(32)));
constexpr int kLanes = 8;

// Unaligned loads and stores; macros, because a helper function would be compiled for
// the default ISA and pass the vectors through memory.
#define TANDEM_LOAD(p) (*reinterpret_cast<const UnalignedLanes*>(p))
#define TANDEM_STORE(p, v) (*reinterpret_cast<UnalignedLanes*>(p) = (v))
typedef float UnalignedLanes __attribute__((vector_size(32), aligned(4), may_alias));

// out[x] = sum_j k[j] * src[j][x] over the 2R+1 rows `src`. Each block of eight outputs
// is accumulated in registers and stored once; the kernel is symmetric, so mirrored taps
// share one multiply. R is a template parameter so the taps unroll into registers.
template <int R>
__attribute__((always_inline)) inline void weighted_sum_fixed(const float* const* src_in, float* __restrict out, int width,
                                             const float* k_in) {
  const float* src[2 * R + 1];
  float k[R + 1];
  for (int j = 0; j <= 2 * R; ++j) src[j] = src_in[j];
  for (int j = 0; j <= R; ++j) k[j] = k_in[j];
  int x = 0;
  for (; x + kLanes <= width; x += kLanes) {
    Lanes acc = k[R] * TANDEM_LOAD(src[R] + x);
#pragma GCC unroll 16
    for (int j = 0; j < R; ++j) acc += k[j] * (TANDEM_LOAD(src[j] + x) + TANDEM_LOAD(src[2 * R - j] + x));
    TANDEM_STORE(out + x, acc);
  }
  for (; x < width; ++x) {
    float acc = k[R] * src[R][x];
    for (int j = 0; j < R; ++j) acc += k[j] * (src[j][x] + src[2 * R - j][x]);
    out[x] = acc;
  }
}

// Any kernel size, for the sizes without a fixed version.
__attribute__((always_inline)) inline void weighted_sum_any(const float* const* src, float* __restrict out, int width, const float* k, int r) {
  for (int x = 0; x < width; ++x) {
    float acc = k[r] * src[r][x];
    for (int j = 0; j < r; ++j) acc += k[j] * (src[j][x] + src[2 * r - j][x]);
    out[x] = acc;
  }
}

__attribute__((always_inline)) inline void weighted_sum(const float* const* src, float* out, int width,
                                                        const float* k, int r) {
  switch (r) {
    case 1: return weighted_sum_fixed<1>(src, out, width, k);
    case 2: return weighted_sum_fixed<2>(src, out, width, k);
    case 3: return weighted_sum_fixed<3>(src, out, width, k);
    case 4: return weighted_sum_fixed<4>(src, out, width, k);
    case 5: return weighted_sum_fixed<5>(src, out, width, k);
    case 6: return weighted_sum_fixed<6>(src, out, width, k);
    case 7: return weighted_sum_fixed<7>(src, out, width, k);
    default: return weighted_sum_any(src, out, width, k, r);
  }
}

}  // namespace

TANDEM_VECTOR_CLONES
void blur_plane(float* plane, int height, int width, std::span<const float> kernel, std::vector<float>& scratch) {
  const int r = static_cast<int>(kernel.size()) / 2;
  const size_t area = static_cast<size_t>(height) * width;
  scratch.resize(area + width + 2 * r);
  float* tmp = scratch.data();
  float* padded = tmp + area;
  const float* taps[64];
  // Horizontal: the taps are shifted views of one reflect-padded row.
  for (int j = 0; j <= 2 * r; ++j) taps[j] = padded + j;
  for (int y = 0; y < height; ++y) {
    const float* row = plane + static_cast<size_t>(y) * width;
    std::memcpy(padded + r, row, sizeof(float) * width);
    for (int i = 1; i <= r; ++i) {
      padded[r - i] = row[i];
      padded[r + width - 1 + i] = row[width - 1 - i];
    }
    weighted_sum(taps, tmp + static_cast<size_t>(y) * width, width, kernel.data(), r);
  }
  // Vertical: the taps are the neighbouring rows, mirrored at the edges.
  for (int y = 0; y < height; ++y) {
    for (int j = 0; j <= 2 * r; ++j) taps[j] = tmp + static_cast<size_t>(reflect(y + j - r, height)) * width;
    weighted_sum(taps, plane + static_cast<size_t>(y) * width, width, kernel.data(), r);
  }
}

void gaussian_blur(std::span<float> image, int channels, int height, int width, int kernel_size,
                   float sigma, std::vector<float>& scratch) {
  const std::vector<float> k = gaussian_kernel1d(kernel_size, sigma);
  const size_t area = static_cast<size_t>(height) * width;
  for (int c = 0; c < channels; ++c) blur_plane(image.data() + c * area, height, width, k, scratch);
}

void gaussian_blur_u8(Image& image, int kernel_size, float sigma) {
  const int c = image.channels, h = image.height, w = image.width;
  const size_t plane = static_cast<size_t>(h) * w;
  thread_local std::vector<float> planes, scratch;
  planes.resize(plane * c);
  for (size_t i = 0; i < plane; ++i)
    for (int ch = 0; ch < c; ++ch) planes[ch * plane + i] = image.pixels[i * c + ch];
  const std::vector<float> k = gaussian_kernel1d(kernel_size, sigma);
  for (int ch = 0; ch < c; ++ch) blur_plane(planes.data() + ch * plane, h, w, k, scratch);
  for (size_t i = 0; i < plane; ++i)
    for (int ch = 0; ch < c; ++ch) {
      const float v = std::clamp(std::nearbyint(planes[ch * plane + i]), 0.0f, 255.0f);
      image.pixels[i * c + ch] = static_cast<uint8_t>(v);
    }
}

}  // namespace tandem::data
