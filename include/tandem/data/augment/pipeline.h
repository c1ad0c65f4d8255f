// A compiled --pipeline: decode (for image files) then the augmentation steps, each
// random choice drawn from the caller's Rng in step order, output uint8 CHW.
//
// When the first step after decode is random_resized_crop or resize and the file is a
// JPEG, the crop box is drawn from the header's size before decoding, and only the part
// of the image under the box is decoded, at the smallest DCT scale (1/2, 1/4, 1/8) that
// still has at least the output's resolution across the box (decode(scaled=0) turns the
// scaling off; the other libjpeg-turbo scales have no SIMD code and decode slower than
// full size). Without scaling the result equals decode-everything-then-crop exactly.
// A PNG (not interlaced) is decoded row by row into that first step instead, so only a few
// of its rows are held; the result is the same as decoding it whole.
//
// Every file's header is checked against PipelineSource::max_pixels before anything of
// the image is allocated.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/codecs/image.h"
#include "tandem/data/codecs/jpeg.h"  // ImageSize
#include "tandem/data/augment/pipeline_spec.h"
#include "tandem/data/augment/rng.h"
#include "tandem/data/augment/geometry.h"

namespace tandem::data {

class PngReader;

// What the pipeline is fed.
struct PipelineSource {
  bool encoded = true;        // JPEG / PNG files (imagefolder); false: raw images (mnist)
  int channels = 3;           // the source's own channels
  int height = 0, width = 0;  // raw images' size; 0 for files (their size varies)
  uint64_t max_pixels = kDefaultMaxImagePixels;  // files: the most pixels a header may declare
};

class Pipeline {
 public:
  // Compiles `spec` for `source`. Throws ConfigError when a step is misplaced (decode not
  // first, to_uint8 not last), normalize has the wrong count of values, or the output
  // size would vary from image to image.
  Pipeline(const PipelineSpec& spec, const PipelineSource& source);

  std::vector<int64_t> sample_shape() const { return {channels_, height_, width_}; }
  size_t sample_bytes() const { return static_cast<size_t>(channels_) * height_ * width_; }
  // From a normalize step; empty when the spec has none.
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& stddev() const { return std_; }
  int channels() const { return channels_; }

  // Decodes a JPEG or PNG file and augments it into `out` (sample_bytes()). Thread-safe.
  // Throws DecodeError when the bytes are not a decodable JPEG or PNG, ImageTooLarge (a
  // DecodeError) when the header declares more than max_pixels pixels.
  void run_file(std::span<const uint8_t> file, Rng& rng, uint8_t* out) const;

  // Augments a raw image of the source's size and channels into `out`. Thread-safe.
  void run_image(const Image& image, Rng& rng, uint8_t* out) const;

 private:
  enum class Kind { kRandomResizedCrop, kResize, kCenterCrop, kHflip, kColorJitter, kBlur, kRotation };
  struct Step {
    Kind kind;
    int height = 0, width = 0;  // output size; resize with width 0: the smaller edge
    RandomResizedCropParams crop;
    double p = 1;                   // hflip, color_jitter, gaussian_blur
    double jitter[4] = {0, 0, 0, 0};  // brightness, contrast, saturation, hue
    int kernel = 0;
    double sigma_min = 0, sigma_max = 0, degrees = 0;
  };

  static Step parse_step(const StepSpec& spec);
  void add_step(const StepSpec& spec, int& height, int& width);
  void apply(const Step& step, Image*& image, Image*& spare, Rng& rng) const;
  void run_steps(size_t first, Image*& image, Image*& spare, Rng& rng, uint8_t* out) const;
  // The first step's crop box on an image of `size` (drawn from rng for
  // random_resized_crop) and its output size.
  struct FirstCrop {
    CropBox box;
    int out_h = 0, out_w = 0;
  };
  FirstCrop first_crop(ImageSize size, Rng& rng) const;
  void decode_fused(std::span<const uint8_t> file, ImageSize size, Image& dst, Rng& rng) const;
  void decode_png_fused(PngReader& png, Image& dst, Rng& rng) const;
  void color_jitter(const Step& step, Image& image, Rng& rng) const;

  std::vector<Step> steps_;
  int channels_ = 3;
  int height_ = 0, width_ = 0;
  bool scaled_decode_ = true;
  bool fuse_first_ = false;
  uint64_t max_pixels_ = kDefaultMaxImagePixels;
  std::vector<float> mean_, std_;
};

}  // namespace tandem::data
