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
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tandem/data/augment/autoaugment.h"
#include "tandem/data/augment/erasing.h"
#include "tandem/data/augment/geometry.h"
#include "tandem/data/augment/pipeline_spec.h"
#include "tandem/data/codecs/image.h"
#include "tandem/data/codecs/jpeg.h"  // ImageSize
#include "tandem/data/core/dataset.h"  // FieldsOut, FieldSpec
#include "tandem/data/core/options.h"
#include "tandem/data/core/rng.h"
#include "tandem/data/python/process_pool.h"

namespace tandem::data {

class PngReader;
class PythonStep;

// What the pipeline is fed.
struct PipelineSource {
  bool encoded = true;        // JPEG / PNG files (imagefolder); false: raw images (mnist)
  int channels = 3;           // the source's own channels
  int height = 0, width = 0;  // raw images' size; 0 for files (their size varies)
  uint64_t max_pixels = kDefaultMaxImagePixels;  // files: the most pixels a header may declare
  // The python() step's interpreter, processes, timeout and memory (--python,
  // --python-procs, ...): needed when the spec has one.
  const PythonRuntime* python = nullptr;
};

class Pipeline {
 public:
  // Compiles `spec` for `source`. Throws ConfigError when a step is misplaced (decode not
  // first, to_uint8 not last, python() before a C++ step or twice), normalize has the
  // wrong count of values, or the output size would vary from image to image. A python()
  // step's processes start here (ConfigError with the Python error when they cannot).
  Pipeline(const PipelineSpec& spec, const PipelineSource& source);
  ~Pipeline();
  Pipeline(Pipeline&&) noexcept;

  // With a python() step, what it returned for sample 0 (learn_output()).
  std::vector<int64_t> sample_shape() const;
  size_t sample_bytes() const;
  // From a normalize step; empty when the spec has none.
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& stddev() const { return std_; }
  int channels() const { return static_cast<int>(sample_shape()[0]); }

  // A pipeline with a python() step learns its output shape from sample 0: call this once,
  // before any other run or sample_shape(), with a function that runs sample 0 of epoch 0
  // (run_file or run_image with index 0) into the pointer it is given. Nothing is written.
  // Throws ConfigError naming sample 0 when it fails or returns the wrong thing. Without a
  // python() step it does nothing.
  void learn_output(const std::function<void(uint8_t* out)>& run_first);
  bool has_python_step() const { return python_ != nullptr; }
  // After learn_output(): the python() step's determinism problem (PythonStep), or "".
  std::string determinism_problem() const;

  // Decodes a JPEG or PNG file and augments it into `out` (sample_bytes()). Thread-safe.
  // Throws DecodeError when the bytes are not a decodable JPEG or PNG, ImageTooLarge (a
  // DecodeError) when the header declares more than max_pixels pixels, PythonSampleError
  // (a DataError) when the python() step fails on it. `index`, the sample's, names it in
  // the python() step's errors.
  // With a python() step that returns a dict, its other fields go into `extra` (when not
  // null), in extra_fields() order.
  void run_file(std::span<const uint8_t> file, Rng& rng, uint8_t* out, uint64_t index = 0,
                const FieldsOut* extra = nullptr) const;

  // Augments a raw image of the source's size and channels into `out`. Thread-safe.
  void run_image(const Image& image, Rng& rng, uint8_t* out, uint64_t index = 0, const FieldsOut* extra = nullptr) const;

  // The fields a python() step returns beside the image (a dict's other fields), learned
  // by learn_output(); empty without such a step. A dataset adds them to its schema
  // (schema_with_extra_fields) and passes FieldsOut to run_file / run_image.
  const std::vector<FieldSpec>& extra_fields() const;

 private:
  enum class Kind {
    kRandomResizedCrop, kResize, kCenterCrop, kRandomCrop, kHflip, kVflip, kGrayscale, kColorJitter, kBlur,
    kRotation, kAutoAugment, kRandomErasing, kRandomChoice, kRandomOrder
  };
  struct Step {
    Kind kind;
    int height = 0, width = 0;  // output size; resize with width 0: the smaller edge
    RandomResizedCropParams crop;
    double p = 1;                   // hflip, vflip, random_grayscale, color_jitter, gaussian_blur
    RandomCropOptions random_crop;  // random_crop
    double jitter[4] = {0, 0, 0, 0};  // brightness, contrast, saturation, hue
    int kernel = 0;
    double sigma_min = 0, sigma_max = 0, degrees = 0;
    AutoAugmentOptions augment;    // trivial_augment_wide, rand_augment, auto_augment, aug_mix
    RandomErasingOptions erasing;  // random_erasing
    std::vector<Step> choices;     // random_choice (one, by weight), random_order (all, shuffled)
    std::vector<double> weights;   // random_choice's, summing to 1
  };

  static Step parse_step(const StepSpec& spec);
  static bool parse_augment_step(const StepSpec& spec, Step& step);
  void decode_and_run(std::span<const uint8_t> file, Rng& rng, uint8_t* out) const;
  void augment_image(const Image& image, Rng& rng, uint8_t* out) const;
  void start_python(const StepSpec& spec, const PipelineSource& source);
  void run_python(const Rng& key, uint64_t index, const std::function<void(uint8_t*)>& made, uint8_t* out,
                  const FieldsOut* extra) const;
  void add_step(const StepSpec& spec, int& height, int& width);
  void apply(const Step& step, Image*& image, Image*& spare, Rng& rng) const;
  void apply_group(const Step& step, Image*& image, Image*& spare, Rng& rng) const;
  void run_steps(size_t first, Image*& image, Image*& spare, Rng& rng, uint8_t* out) const;
  bool flip_at_copy(size_t i) const;
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
  std::unique_ptr<PythonStep> python_;  // the python() step, last; null without one
};

}  // namespace tandem::data
