// Antialiased bilinear resampling with torch's semantics (interpolate(mode="bilinear",
// antialias=True)): the resize half of Resize and RandomResizedCrop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "tandem/data/codecs/image.h"

namespace tandem::data {

// Source rows handed out top to bottom, for resampling an image that is never whole in
// memory (a PNG decoded row by row): only the rows the filter is on are held.
class RowSource {
 public:
  virtual ~RowSource() = default;
  // Row y (HWC, readable 1 byte past its last pixel). y never decreases from one call to
  // the next; the rows of the last two calls stay valid.
  virtual const uint8_t* row(int y) = 0;
};

// A source for resampling: `box` (fractional, in pixels of `pixels`) is scaled to the
// output; filter taps are clamped to columns [clamp_x0, clamp_x1) and rows [clamp_y0,
// clamp_y1). torchvision crops before it resizes, so there the clamp is the crop box.
struct ResampleSource {
  const uint8_t* pixels = nullptr;  // HWC; readable 1 byte past the last pixel (an Image is)
  size_t stride = 0;  // bytes per row
  int channels = 3;
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int clamp_x0 = 0, clamp_y0 = 0, clamp_x1 = 0, clamp_y1 = 0;
  RowSource* rows = nullptr;  // when set, rows come from here rather than pixels and stride
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

}  // namespace tandem::data
