#include "tandem/data/augment/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "tandem/common/error.h"
#include "tandem/data/codecs/jpeg.h"
#include "tandem/data/codecs/pixel_limit.h"
#include "tandem/data/codecs/png.h"
#include "tandem/data/augment/color.h"
#include "tandem/data/augment/gaussian_blur.h"
#include "tandem/data/augment/resample.h"
#include "tandem/data/python/python_step.h"

namespace tandem::data {
namespace {

[[noreturn]] void misplaced(const std::string& problem) {
  throw ConfigError("--pipeline: " + problem + " (see docs/configuration.md, 'Augmentation pipeline')");
}

// Gray to RGB by repetition (decode(channels=3) on a gray source).
void expand_gray(const Image& gray, Image& rgb) {
  rgb.reshape(gray.height, gray.width, 3);
  const size_t n = static_cast<size_t>(gray.height) * gray.width;
  for (size_t i = 0; i < n; ++i) rgb.pixels[i * 3] = rgb.pixels[i * 3 + 1] = rgb.pixels[i * 3 + 2] = gray.pixels[i];
}

}  // namespace

Pipeline::Pipeline(const PipelineSpec& spec, const PipelineSource& source)
    : channels_(source.channels), max_pixels_(source.max_pixels) {
  size_t first = 0;
  if (!spec.steps.empty() && spec.steps[0].op == "decode") {
    const int c = static_cast<int>(spec.steps[0].param("channels"));
    if (c != 0) channels_ = c;
    scaled_decode_ = spec.steps[0].param("scaled") != 0;
    first = 1;
  }
  int height = source.height, width = source.width;
  const StepSpec* python = nullptr;
  for (size_t i = first; i < spec.steps.size(); ++i) {
    const StepSpec& s = spec.steps[i];
    if (s.op == "decode") misplaced("decode must be the first step");
    if (s.op == "python") {
      if (python) misplaced("one python() step at most: call your functions from one function");
      python = &s;
      continue;
    }
    if (s.op == "to_uint8") {
      if (i + 1 != spec.steps.size()) misplaced("to_uint8 must be the last step");
      continue;
    }
    if (s.op == "normalize") {
      if (s.params.size() != 2 * static_cast<size_t>(channels_)) {
        misplaced("normalize needs " + std::to_string(channels_) + " mean and " + std::to_string(channels_) +
                  " std values for " + std::to_string(channels_) + "-channel images");
      }
      mean_.assign(s.params.begin(), s.params.begin() + channels_);
      std_.assign(s.params.begin() + channels_, s.params.end());
      continue;
    }
    if (python) {
      misplaced(s.op + " follows python(" + python->file + ":" + python->function +
                "): put the python() step after every other step (normalize and to_uint8 may follow)");
    }
    add_step(s, height, width);
  }
  if (height == 0 || width == 0) {
    misplaced("the output size would vary with the image: end with random_resized_crop(N), center_crop(N), "
              "random_crop(N) or resize(H, W)");
  }
  height_ = height;
  width_ = width;
  fuse_first_ = source.encoded && !steps_.empty() &&
                (steps_[0].kind == Kind::kRandomResizedCrop || steps_[0].kind == Kind::kResize);
  if (python) start_python(*python, source);
}

Pipeline::~Pipeline() = default;
Pipeline::Pipeline(Pipeline&&) noexcept = default;

void Pipeline::start_python(const StepSpec& s, const PipelineSource& source) {
  if (!source.python) throw std::logic_error("a python() step needs PipelineSource::python");
  PythonPoolOptions opts = python_runtime_options(*source.python);
  opts.kind = PythonPoolOptions::Kind::kFunction;
  opts.file = s.file;
  opts.name = s.function;
  opts.transforms_json = s.transforms;
  python_ = std::make_unique<PythonStep>(std::move(opts));
}

std::vector<int64_t> Pipeline::sample_shape() const {
  if (python_) {
    if (!python_->learned()) throw std::logic_error("Pipeline::sample_shape() before learn_output()");
    return python_->output_shape();
  }
  return {channels_, height_, width_};
}

size_t Pipeline::sample_bytes() const {
  size_t n = 1;
  for (int64_t d : sample_shape()) n *= static_cast<size_t>(d);
  return n;
}

void Pipeline::learn_output(const std::function<void(uint8_t* out)>& run_first) {
  if (!python_ || python_->learned()) return;
  const std::string step = "--pipeline step python(" + python_->pool().options().file + ":" +
                           python_->pool().options().name + ")";
  try {
    run_first(nullptr);
  } catch (const DataError& e) {
    throw ConfigError("cannot use " + step + " on sample 0: " + e.what());
  }
  const size_t channels = static_cast<size_t>(python_->output_shape()[0]);
  if (!mean_.empty() && mean_.size() != channels) {
    misplaced("normalize has values for " + std::to_string(mean_.size()) + " channels, but " + step + " returns " +
              std::to_string(channels) + ": give it " + std::to_string(channels) + " mean and std values");
  }
}

std::string Pipeline::determinism_problem() const { return python_ ? python_->determinism_problem() : ""; }

// The C++ steps' image, made by `made` into a buffer, through the python() step into `out`,
// seeded as a Python dataset's sample is: the first draw of the sample's fresh Rng.
void Pipeline::run_python(const Rng& key, uint64_t index, const std::function<void(uint8_t*)>& made,
                          uint8_t* out, const FieldsOut* extra) const {
  thread_local std::vector<uint8_t> input;
  input.resize(static_cast<size_t>(channels_) * height_ * width_);
  made(input.data());
  Rng first = key;
  python_->run(index, first.next_u64(), input, {channels_, height_, width_}, out, extra);
}

namespace {

// The index `u` (uniform in [0, 1)) falls on, by cumulative weight.
size_t choose(const std::vector<double>& weights, double u) {
  double at = 0;
  for (size_t i = 0; i + 1 < weights.size(); ++i) {
    at += weights[i];
    if (u < at) return i;
  }
  return weights.size() - 1;
}

RandomCropOptions random_crop_options(const StepSpec& s, int height, int width) {
  RandomCropOptions o;
  o.height = height;
  o.width = width;
  const char* sides[4] = {"padding_left", "padding_top", "padding_right", "padding_bottom"};
  for (int i = 0; i < 4; ++i) o.pad[i] = static_cast<int>(s.param(sides[i]));
  o.pad_if_needed = s.param("pad_if_needed") != 0;
  o.fill = static_cast<uint8_t>(s.param("fill"));
  o.mode = static_cast<PadMode>(static_cast<int>(s.param("padding_mode")));
  return o;
}

}  // namespace

// A spec's step with its parameters read out. REQUIRES: an augmentation op (not decode,
// normalize or to_uint8).
Pipeline::Step Pipeline::parse_step(const StepSpec& s) {
  Step step{};
  const bool sized = s.op == "random_resized_crop" || s.op == "resize" || s.op == "center_crop" || s.op == "random_crop";
  if (sized) {
    step.height = static_cast<int>(s.param("size"));
    step.width = static_cast<int>(s.param("width"));
    if (step.width == 0 && s.op != "resize") step.width = step.height;
  }
  if (s.op == "random_resized_crop") {
    step.kind = Kind::kRandomResizedCrop;
    step.crop = {s.param("scale_min"), s.param("scale_max"), s.param("ratio_min"), s.param("ratio_max")};
  } else if (s.op == "resize") {
    step.kind = Kind::kResize;
  } else if (s.op == "center_crop") {
    step.kind = Kind::kCenterCrop;
  } else if (s.op == "random_crop") {
    step.kind = Kind::kRandomCrop;
    step.random_crop = random_crop_options(s, step.height, step.width);
  } else if (s.op == "hflip" || s.op == "vflip" || s.op == "random_grayscale") {
    step.kind = s.op == "hflip" ? Kind::kHflip : s.op == "vflip" ? Kind::kVflip : Kind::kGrayscale;
  } else if (s.op == "color_jitter") {
    step.kind = Kind::kColorJitter;
    for (int k = 0; k < 4; ++k) step.jitter[k] = s.params[k];
  } else if (s.op == "gaussian_blur") {
    step.kind = Kind::kBlur;
    step.kernel = static_cast<int>(s.param("kernel_size"));
    step.sigma_min = s.param("sigma_min");
    step.sigma_max = s.param("sigma_max");
  } else if (s.op == "rotation") {
    step.kind = Kind::kRotation;
    step.degrees = s.param("degrees");
  } else if (s.op == "random_choice" || s.op == "random_order") {
    step.kind = s.op == "random_choice" ? Kind::kRandomChoice : Kind::kRandomOrder;
    for (const StepSpec& sub : s.steps) step.choices.push_back(parse_step(sub));
    step.weights = s.params;
  } else if (!parse_augment_step(s, step)) {
    throw std::logic_error("pipeline step '" + s.op + "' has no implementation");
  }
  if (s.op == "hflip" || s.op == "vflip" || s.op == "random_grayscale" || s.op == "color_jitter" ||
      s.op == "gaussian_blur") {
    step.p = s.param("p");
  }
  return step;
}

// The AutoAugment family and random_erasing; false for any other op.
bool Pipeline::parse_augment_step(const StepSpec& s, Step& step) {
  auto count = [&](const char* name) { return static_cast<int>(s.param(name)); };
  AutoAugmentOptions& a = step.augment;
  step.kind = Kind::kAutoAugment;
  if (s.op == "trivial_augment_wide") {
    a.policy = AugmentPolicy::kTrivialAugmentWide;
    a.num_magnitude_bins = count("num_magnitude_bins");
  } else if (s.op == "rand_augment") {
    a.policy = AugmentPolicy::kRandAugment;
    a.num_ops = count("num_ops");
    a.magnitude = count("magnitude");
    a.num_magnitude_bins = count("num_magnitude_bins");
  } else if (s.op == "auto_augment") {
    a.policy = AugmentPolicy::kAutoAugment;
    a.dataset = static_cast<AutoAugmentDataset>(count("policy"));
  } else if (s.op == "aug_mix") {
    a.policy = AugmentPolicy::kAugMix;
    a.severity = count("severity");
    a.mixture_width = count("mixture_width");
    a.chain_depth = count("chain_depth");
    a.alpha = s.param("alpha");
  } else if (s.op == "random_erasing") {
    step.kind = Kind::kRandomErasing;
    step.erasing = {s.param("p"), s.param("scale_min"), s.param("scale_max"), s.param("ratio_min"),
                    s.param("ratio_max"), count("value")};
  } else {
    return false;
  }
  return true;
}

// Adds one augmentation step and tracks the image size through it (0 = varies).
void Pipeline::add_step(const StepSpec& s, int& height, int& width) {
  const Step step = parse_step(s);
  if (step.kind == Kind::kBlur && height && width && (step.kernel / 2 >= height || step.kernel / 2 >= width)) {
    misplaced("gaussian_blur kernel " + std::to_string(step.kernel) + " is too large for " + std::to_string(height) +
              "x" + std::to_string(width) + " images");
  }
  if (step.kind == Kind::kResize && step.width == 0) {
    if (height && width) std::tie(height, width) = resize_smaller_edge(height, width, step.height);
    else height = width = 0;
  } else if (step.kind == Kind::kRandomResizedCrop || step.kind == Kind::kResize || step.kind == Kind::kCenterCrop ||
             step.kind == Kind::kRandomCrop) {
    height = step.height;
    width = step.width;
  }
  steps_.push_back(step);
}

void Pipeline::color_jitter(const Step& step, Image& image, Rng& rng) const {
  // ColorJitter.get_params: a random order of the four, then each factor that is on.
  int order[4] = {0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.below(static_cast<uint64_t>(i) + 1)]);
  double factor[4];
  for (int k = 0; k < 4; ++k) {
    const double j = step.jitter[k];
    if (j == 0) continue;
    factor[k] = k == 3 ? rng.uniform(-j, j) : rng.uniform(std::max(0.0, 1.0 - j), 1.0 + j);
  }
  for (int k : order) {
    if (step.jitter[k] == 0) continue;
    const double f = factor[k];
    if (k == 0) adjust_brightness(image, f);
    if (k == 1) adjust_contrast(image, f);
    if (k == 2) adjust_saturation(image, f);
    if (k == 3) adjust_hue(image, f);
  }
}

// random_choice: one of its steps, by weight; random_order: all, in a shuffled order.
void Pipeline::apply_group(const Step& step, Image*& image, Image*& spare, Rng& rng) const {
  if (step.kind == Kind::kRandomChoice) return apply(step.choices[choose(step.weights, rng.uniform())], image, spare, rng);
  std::vector<size_t> order(step.choices.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  for (const size_t k : order) apply(step.choices[k], image, spare, rng);
}

void Pipeline::apply(const Step& step, Image*& image, Image*& spare, Rng& rng) const {
  Image& img = *image;
  switch (step.kind) {
    case Kind::kRandomResizedCrop: {
      const CropBox box = random_resized_crop_box(img.height, img.width, step.crop, rng);
      ResampleSource src{img.pixels.data(), img.stride(), img.channels, double(box.left), double(box.top),
                         double(box.left + box.width), double(box.top + box.height), box.left, box.top,
                         box.left + box.width, box.top + box.height};
      resample(src, step.height, step.width, *spare);
      return std::swap(image, spare);
    }
    case Kind::kResize: {
      const auto [h, w] = step.width ? std::pair{step.height, step.width}
                                     : resize_smaller_edge(img.height, img.width, step.height);
      resize(img, h, w, *spare);
      return std::swap(image, spare);
    }
    case Kind::kCenterCrop:
      center_crop(img, step.height, step.width, *spare);
      return std::swap(image, spare);
    case Kind::kRandomCrop:
      random_crop(img, step.random_crop, rng, *spare);
      return std::swap(image, spare);
    case Kind::kHflip:
      if (rng.uniform() < step.p) hflip(img);
      return;
    case Kind::kVflip:
      if (rng.uniform() < step.p) vflip(img);
      return;
    case Kind::kGrayscale:
      if (rng.uniform() < step.p) grayscale_rgb(img);
      return;
    case Kind::kColorJitter:
      if (step.p >= 1 || rng.uniform() < step.p) color_jitter(step, img, rng);
      return;
    case Kind::kBlur: {
      if (step.p < 1 && !(rng.uniform() < step.p)) return;
      const float sigma = static_cast<float>(rng.uniform(step.sigma_min, step.sigma_max));
      if (step.kernel / 2 >= img.height || step.kernel / 2 >= img.width) {
        throw ConfigError("--pipeline: gaussian_blur kernel " + std::to_string(step.kernel) + " is too large for a " +
                          std::to_string(img.height) + "x" + std::to_string(img.width) + " image: use a smaller kernel");
      }
      return gaussian_blur_u8(img, step.kernel, sigma);
    }
    case Kind::kRotation:
      rotate_nearest(img, rng.uniform(-step.degrees, step.degrees), *spare);
      return std::swap(image, spare);
    case Kind::kAutoAugment:
      return auto_augment(step.augment, image, spare, rng);
    case Kind::kRandomErasing:
      return random_erasing(img, step.erasing, rng);
    case Kind::kRandomChoice:
    case Kind::kRandomOrder:
      return apply_group(step, image, spare, rng);
  }
}

// An hflip followed by colour steps only is folded into the CHW copy: the same draw, the
// same bytes (ColorJitter works on each pixel alone, and contrast's mean is the same for
// the flipped image), one pass fewer.
bool Pipeline::flip_at_copy(size_t i) const {
  for (size_t j = i + 1; j < steps_.size(); ++j) {
    if (steps_[j].kind != Kind::kColorJitter && steps_[j].kind != Kind::kHflip) return false;
  }
  return steps_[i].kind == Kind::kHflip;
}

void Pipeline::run_steps(size_t first, Image*& image, Image*& spare, Rng& rng, uint8_t* out) const {
  bool flip = false;
  for (size_t i = first; i < steps_.size(); ++i) {
    if (!flip_at_copy(i)) {
      apply(steps_[i], image, spare, rng);
    } else if (rng.uniform() < steps_[i].p) {
      flip = !flip;
    }
  }
  if (image->height != height_ || image->width != width_ || image->channels != channels_) {
    throw std::logic_error("pipeline made a " + std::to_string(image->height) + "x" + std::to_string(image->width) +
                           " image, not the planned " + std::to_string(height_) + "x" + std::to_string(width_));
  }
  write_chw(*image, out, flip);
}

void Pipeline::run_image(const Image& source, Rng& rng, uint8_t* out, uint64_t index, const FieldsOut* extra) const {
  if (!python_) return augment_image(source, rng, out);
  const Rng key = rng;
  run_python(key, index, [&](uint8_t* made) { augment_image(source, rng, made); }, out, extra);
}

const std::vector<FieldSpec>& Pipeline::extra_fields() const {
  static const std::vector<FieldSpec> kNone;
  return python_ ? python_->extra_fields() : kNone;
}

void Pipeline::augment_image(const Image& source, Rng& rng, uint8_t* out) const {
  thread_local Image a, b;
  Image *image = &a, *spare = &b;
  if (channels_ == 3 && source.channels == 1) expand_gray(source, a);
  else a = source;
  run_steps(0, image, spare, rng, out);
}

}  // namespace tandem::data
