// Image transforms with torchvision's semantics (torchvision.transforms on uint8 tensors,
// v0.14): the same parameter draws, the same geometry, the same arithmetic where it
// decides a pixel (truncation in the colour blends, round-half-even after float resampling).
// Random parameters come from the caller's Rng, so each is a pure function of the key.
#pragma once

#include <cstdint>

#include "tandem/data/codecs/image.h"
#include "tandem/data/augment/rng.h"

namespace tandem::data {

// A crop in pixels: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int top = 0, left = 0, height = 0, width = 0;
};

struct RandomResizedCropParams {
  double scale_min = 0.08, scale_max = 1.0;          // of the image's area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
};

// RandomResizedCrop.get_params: 10 attempts of (area, log-uniform aspect ratio, position),
// then the centre crop clamped to the ratio range. Always inside the image.
CropBox random_resized_crop_box(int height, int width, const RandomResizedCropParams& p, Rng& rng);

// A source for resampling: `box` (fractional, in pixels of `pixels`) is scaled to the
// output; filter taps are clamped to columns [clamp_x0, clamp_x1) and rows [clamp_y0,
// clamp_y1). torchvision crops before it resizes, so there the clamp is the crop box.
struct ResampleSource {
  const uint8_t* pixels = nullptr;  // HWC; readable 1 byte past the last pixel (an Image is)
  size_t stride = 0;  // bytes per row
  int channels = 3;
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int clamp_x0 = 0, clamp_y0 = 0, clamp_x1 = 0, clamp_y1 = 0;
};

// Antialiased bilinear resampling (torch's interpolate(mode="bilinear", antialias=True),
// which is PIL's): a triangle filter stretched by the downscale factor, weights normalised
// over the clamped taps, float arithmetic, round half to even.
void resample(const ResampleSource& src, int out_height, int out_width, Image& dst);

// The whole of `src` resampled to out_height x out_width.
void resize(const Image& src, int out_height, int out_width, Image& dst);

// Resize(size) with one int: the smaller edge becomes `size`, the other
// int(size * long / short). Returns {height, width}.
std::pair<int, int> resize_smaller_edge(int height, int width, int size);

// crop with zero padding where the box leaves the image (torchvision's crop()).
void crop(const Image& src, const CropBox& box, Image& dst);

// CenterCrop: pads with zeros when the image is smaller, offsets round half to even.
void center_crop(const Image& src, int height, int width, Image& dst);

void hflip(Image& image);

// ColorJitter's four adjustments on uint8 (torchvision's _blend: float32, clamp, truncate).
// Factors are doubles, as Python passes them: 1 - factor is rounded to float32 only after
// the subtraction, which decides some pixels.
void adjust_brightness(Image& image, double factor);
void adjust_contrast(Image& image, double factor);
void adjust_saturation(Image& image, double factor);
void adjust_hue(Image& image, double hue_factor);  // REQUIRES: -0.5 <= hue_factor <= 0.5

// rotate(angle) about the centre, counter-clockwise, nearest neighbour, same size, fill 0.
void rotate_nearest(const Image& src, double angle_degrees, Image& dst);

// GaussianBlur on uint8: float32 separable blur with reflect padding, then round.
// REQUIRES: kernel_size odd; kernel_size / 2 < height and width (torch's reflect pad).
void gaussian_blur_u8(Image& image, int kernel_size, float sigma);

}  // namespace tandem::data
