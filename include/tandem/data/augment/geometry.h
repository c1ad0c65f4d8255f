// Geometric transforms with torchvision's semantics (torchvision.transforms on uint8
// tensors, v0.14): RandomResizedCrop's box draws, crops, flips and rotation. Random
// parameters come from the caller's Rng, so each is a pure function of the key.
#pragma once

#include <utility>

#include "tandem/data/augment/rng.h"
#include "tandem/data/codecs/image.h"

namespace tandem::data {

struct RandomResizedCropParams {
  double scale_min = 0.08, scale_max = 1.0;          // of the image's area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // width / height
};

// RandomResizedCrop.get_params: 10 attempts of (area, log-uniform aspect ratio, position),
// then the centre crop clamped to the ratio range. Always inside the image.
CropBox random_resized_crop_box(int height, int width, const RandomResizedCropParams& p, Rng& rng);

// crop with zero padding where the box leaves the image (torchvision's crop()).
void crop(const Image& src, const CropBox& box, Image& dst);

// CenterCrop: pads with zeros when the image is smaller, offsets round half to even.
void center_crop(const Image& src, int height, int width, Image& dst);

void hflip(Image& image);

// rotate(angle) about the centre, counter-clockwise, nearest neighbour, same size, fill 0.
void rotate_nearest(const Image& src, double angle_degrees, Image& dst);

}  // namespace tandem::data
