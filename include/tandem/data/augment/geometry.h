// Geometric transforms with torchvision's semantics (torchvision.transforms on uint8
// tensors, v0.14): RandomResizedCrop's box draws, crops, flips and rotation. Random
// parameters come from the caller's Rng, so each is a pure function of the key.
#pragma once

#include <array>
#include <utility>

#include "tandem/data/codecs/image.h"
#include "tandem/data/core/rng.h"

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
void vflip(Image& image);

// RandomCrop: pad by `pad` (left, top, right, bottom), then, with pad_if_needed, by the
// shortfall on both sides of a dimension smaller than the crop, then a crop at a random
// position (none drawn when the padded image is the crop's size).
enum class PadMode { kConstant, kEdge, kReflect, kSymmetric };
struct RandomCropOptions {
  int height = 0, width = 0;
  int pad[4] = {0, 0, 0, 0};  // left, top, right, bottom
  bool pad_if_needed = false;
  uint8_t fill = 0;
  PadMode mode = PadMode::kConstant;
};
// Throws DataError when the padded image is smaller than the crop.
void random_crop(const Image& src, const RandomCropOptions& o, Rng& rng, Image& dst);

// rotate(angle) about the centre, counter-clockwise, nearest neighbour, same size, fill 0.
void rotate_nearest(const Image& src, double angle_degrees, Image& dst);

// An affine transform as F.affine takes it (tensor path): angle (degrees, clockwise as
// F.affine reads it), translation in pixels, scale, shear (degrees), about `center`
// given relative to the image centre (torchvision's center_f; {0, 0}: the centre).
struct AffineParams {
  double angle = 0, translate_x = 0, translate_y = 0, scale = 1, shear_x = 0, shear_y = 0;
  double center_x = 0, center_y = 0;
};

// torchvision's _get_inverse_affine_matrix(inverted=True), in double as Python computes it:
// the output-to-input matrix [a, b, c, d, e, f] (x_in = a x + b y + c about the centre).
std::array<double, 6> inverse_affine_matrix(const AffineParams& p);

enum class Interpolation { kNearest, kBilinear };

// F_t.affine: a float32 grid of pixel centres through `inverse` (normalised by half the
// size), grid_sample(align_corners=False, zeros outside) in float32, then round half to
// even. Same size as src. Nearest ties go half to even, as torch's round does.
void affine_sample(const Image& src, const std::array<double, 6>& inverse, Interpolation mode, Image& dst);

}  // namespace tandem::data
