#include "tandem/data/gaussian_blur.h"

#include <cmath>

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

// Horizontal pass of one row into `out`, reading through a reflect-padded copy.
void blur_row(const float* in, float* out, int width, const float* k, int ksize, float* padded) {
  const int r = ksize / 2;
  for (int x = -r; x < width + r; ++x) padded[x + r] = in[reflect(x, width)];
  for (int x = 0; x < width; ++x) {
    float acc = 0;
    for (int j = 0; j < ksize; ++j) acc += k[j] * padded[x + j];
    out[x] = acc;
  }
}

}  // namespace

void gaussian_blur(std::span<float> image, int channels, int height, int width, int kernel_size,
                   float sigma, std::vector<float>& scratch) {
  const std::vector<float> k = gaussian_kernel1d(kernel_size, sigma);
  const int r = kernel_size / 2;
  const size_t plane = static_cast<size_t>(height) * width;
  scratch.resize(plane + width + 2 * r);
  float* tmp = scratch.data();
  float* padded = tmp + plane;
  for (int c = 0; c < channels; ++c) {
    float* img = image.data() + c * plane;
    for (int y = 0; y < height; ++y) blur_row(img + y * width, tmp + y * width, width, k.data(), kernel_size, padded);
    // Vertical pass row by row, so the inner loop runs over contiguous x.
    for (int y = 0; y < height; ++y) {
      float* out = img + y * width;
      for (int x = 0; x < width; ++x) out[x] = 0;
      for (int j = 0; j < kernel_size; ++j) {
        const float* src = tmp + static_cast<size_t>(reflect(y + j - r, height)) * width;
        const float w = k[j];
        for (int x = 0; x < width; ++x) out[x] += w * src[x];
      }
    }
  }
}

}  // namespace tandem::data
