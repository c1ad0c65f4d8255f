#include "tandem/data/sources/synthetic.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "tandem/common/error.h"
#include "tandem/common/hash.h"
#include "tandem/data/augment/gaussian_blur.h"
#include "tandem/data/core/rng.h"

namespace tandem::data {
namespace {

void check_index(uint64_t index, const DatasetInfo& info) {
  if (index >= info.size) {
    throw std::out_of_range("sample index " + std::to_string(index) + " is outside dataset '" +
                            info.name + "' of " + std::to_string(info.size) + " samples");
  }
}

// Every generated set: 3 x size x size float samples, 10000 unless --dataset-size, and
// a fingerprint naming all that fixes their values ("<name>/v1 seed=.. size=.. image=..",
// and the classes where they change the pixels).
DatasetInfo base_info(const std::string& name, const GeneratedOptions& opts, int size, bool classes_in_pixels) {
  if (opts.num_classes < 2) {
    throw ConfigError("--num-classes must be at least 2, got " + std::to_string(opts.num_classes));
  }
  DatasetInfo info;
  info.name = name;
  info.size = opts.dataset_size ? opts.dataset_size : 10000;
  info.sample_shape = {3, size, size};
  info.num_classes = opts.num_classes;
  std::string description = name + "/v1 seed=" + std::to_string(opts.seed) + " size=" + std::to_string(info.size) +
                            " image=" + std::to_string(size);
  if (classes_in_pixels) description += " classes=" + std::to_string(opts.num_classes);
  info.fingerprint = fingerprint_of(description);
  info.description = description;
  return info;
}

class SyntheticDataset final : public Dataset {
 public:
  explicit SyntheticDataset(const GeneratedOptions& opts) : seed_(opts.seed) {
    const int size = opts.image_size ? opts.image_size : 32;
    if (size < 8) throw ConfigError("--image-size must be at least 8 for --data synthetic");
    if (opts.num_classes > 16) {
      throw ConfigError("--data synthetic has at most 16 classes (a 4x4 grid), got --num-classes " +
                        std::to_string(opts.num_classes));
    }
    info_ = base_info("synthetic", opts, size, true);
  }

  const DatasetInfo& info() const override { return info_; }

  int64_t make_sample(uint64_t index, uint32_t epoch, std::span<std::byte> out, const FieldsOut*) const override {
    check_index(index, info_);
    const int s = static_cast<int>(info_.sample_shape[1]);
    const int64_t label = static_cast<int64_t>(index % info_.num_classes);
    float* px = reinterpret_cast<float*>(out.data());
    // Noise is redrawn every epoch: the augmentation the model must see through.
    Rng noise(kAugmentStream, seed_, epoch, index);
    for (int i = 0; i < 3 * s * s; ++i) px[i] = static_cast<float>(0.8 * noise.normal());
    // The square's place is the class's grid cell, jittered per sample.
    Rng content(kContentStream, seed_, index);
    const int cell = s / 4, side = cell / 2;
    const int jitter = cell - side;
    const int y0 = static_cast<int>(label / 4) * cell + static_cast<int>(content.below(jitter + 1));
    const int x0 = static_cast<int>(label % 4) * cell + static_cast<int>(content.below(jitter + 1));
    const float brightness = static_cast<float>(content.uniform(0.4, 0.8));
    for (int c = 0; c < 3; ++c)
      for (int y = y0; y < y0 + side; ++y)
        for (int x = x0; x < x0 + side; ++x) px[(c * s + y) * s + x] += brightness;
    return label;
  }

 private:
  uint64_t seed_;
  DatasetInfo info_;
};

class BlurBenchmarkDataset final : public Dataset {
 public:
  explicit BlurBenchmarkDataset(const GeneratedOptions& opts) : seed_(opts.seed) {
    const int size = opts.image_size ? opts.image_size : 224;
    if (size <= kBlurKernel / 2) {
      throw ConfigError("--image-size must exceed " + std::to_string(kBlurKernel / 2) +
                        " for --data blur-benchmark");
    }
    info_ = base_info("blur-benchmark", opts, size, true);
  }

  const DatasetInfo& info() const override { return info_; }

  int64_t make_sample(uint64_t index, uint32_t epoch, std::span<std::byte> out, const FieldsOut*) const override {
    check_index(index, info_);
    const int s = static_cast<int>(info_.sample_shape[1]);
    std::span<float> px(reinterpret_cast<float*>(out.data()), static_cast<size_t>(3) * s * s);
    Rng content(kContentStream, seed_, index);
    for (float& v : px) v = static_cast<float>(content.uniform());
    Rng augment(kAugmentStream, seed_, epoch, index);
    std::vector<float> kernels[kBlurRepeats];
    for (auto& k : kernels) k = gaussian_kernel1d(kBlurKernel, static_cast<float>(augment.uniform(kBlurSigmaMin, kBlurSigmaMax)));
    // Channels are independent, so each plane takes all ten blurs while it sits in cache.
    thread_local std::vector<float> scratch;
    const size_t area = static_cast<size_t>(s) * s;
    for (int c = 0; c < 3; ++c)
      for (const auto& k : kernels) blur_plane(px.data() + c * area, s, s, k, scratch);
    return static_cast<int64_t>(index % info_.num_classes);
  }

 private:
  uint64_t seed_;
  DatasetInfo info_;
};

class PremadeDataset final : public Dataset {
 public:
  explicit PremadeDataset(const GeneratedOptions& opts) {
    const int size = opts.image_size ? opts.image_size : 224;
    info_ = base_info("premade", opts, size, false);
    image_.resize(info_.sample_bytes() / sizeof(float));
    Rng content(kContentStream, opts.seed);
    for (float& v : image_) v = static_cast<float>(content.uniform());
  }

  const DatasetInfo& info() const override { return info_; }

  int64_t make_sample(uint64_t index, uint32_t, std::span<std::byte> out, const FieldsOut*) const override {
    check_index(index, info_);
    std::memcpy(out.data(), image_.data(), info_.sample_bytes());
    return static_cast<int64_t>(index % info_.num_classes);
  }

 private:
  DatasetInfo info_;
  std::vector<float> image_;
};

}  // namespace

std::shared_ptr<const Dataset> make_premade(const GeneratedOptions& opts) { return std::make_shared<PremadeDataset>(opts); }

std::shared_ptr<const Dataset> make_synthetic(const GeneratedOptions& opts) {
  return std::make_shared<SyntheticDataset>(opts);
}

std::shared_ptr<const Dataset> make_blur_benchmark(const GeneratedOptions& opts) {
  return std::make_shared<BlurBenchmarkDataset>(opts);
}

}  // namespace tandem::data
