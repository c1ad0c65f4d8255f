// Built-in datasets that need no files.
#pragma once

#include <cstdint>
#include <memory>

#include "tandem/data/core/dataset.h"

namespace tandem::data {

// What the generated sets take from the settings (source_kinds.h generated_options()).
struct GeneratedOptions {
  uint64_t seed = 0;          // --seed
  int num_classes = 10;       // --num-classes
  int image_size = 0;         // --image-size: 0 = the set's default
  uint64_t dataset_size = 0;  // --dataset-size: 0 = 10000
};

// "synthetic": a small learnable task, so a model's loss really falls. Each 3xSxS image
// (S = image_size, default 32) holds a bright square in the grid cell of its class, with
// a position jitter fixed per sample and Gaussian noise redrawn every epoch.
std::shared_ptr<const Dataset> make_synthetic(const GeneratedOptions& opts);

// "blur-benchmark": the image set of the heterogeneous-cluster benchmark tandem comes
// from. Sample i is a 3x224x224 float image of uniform noise seeded by (seed, i), label
// i % num_classes, then 10 x GaussianBlur(kernel 11, sigma uniform in [0.1, 2.0]) with
// each sigma drawn from the (seed, epoch, i) stream.
std::shared_ptr<const Dataset> make_blur_benchmark(const GeneratedOptions& opts);

// "premade": pre-made samples with no augmentation (a copy of one fixed 3xSxS image,
// S default 224), to measure transport alone.
std::shared_ptr<const Dataset> make_premade(const GeneratedOptions& opts);

inline constexpr int kBlurRepeats = 10;
inline constexpr int kBlurKernel = 11;
inline constexpr float kBlurSigmaMin = 0.1f;
inline constexpr float kBlurSigmaMax = 2.0f;

}  // namespace tandem::data
