// Gaussian blur with torchvision's semantics (transforms.GaussianBlur): a normalised
// kernel sampled at integer offsets, reflect padding, applied per channel.
#pragma once

#include <span>
#include <vector>

#include "tandem/data/codecs/image.h"

namespace tandem::data {

// torchvision's _get_gaussian_kernel1d: exp(-0.5 (x/sigma)^2) at x = -k/2..k/2, summing to 1.
std::vector<float> gaussian_kernel1d(int kernel_size, float sigma);

// Blurs one HxW plane in place with a symmetric 1-D `kernel` along both axes.
// `scratch` is reused between calls to avoid allocation.
// REQUIRES: kernel.size() odd, height and width > kernel.size() / 2.
void blur_plane(float* plane, int height, int width, std::span<const float> kernel, std::vector<float>& scratch);

// Blurs a CHW float image in place (every channel with the same sigma).
void gaussian_blur(std::span<float> image, int channels, int height, int width, int kernel_size,
                   float sigma, std::vector<float>& scratch);

// GaussianBlur on uint8: float32 separable blur with reflect padding, then round.
// REQUIRES: kernel_size odd; kernel_size / 2 < height and width (torch's reflect pad).
void gaussian_blur_u8(Image& image, int kernel_size, float sigma);

}  // namespace tandem::data
