#include "tandem/data/sources/python_images.h"

#include <span>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/codecs/jpeg.h"
#include "tandem/data/core/rng.h"
#include "tandem/data/python/python_fields.h"

namespace tandem::data {
namespace {

const SampleField* image_field(const SampleFields& fields) {
  for (const auto& [name, f] : fields) {
    if (name == kImageField) return &f;
  }
  return nullptr;
}

std::span<const uint8_t> bytes_of(const SampleField& f) {
  return {reinterpret_cast<const uint8_t*>(f.bytes.data()), f.bytes.size()};
}

}  // namespace

bool is_encoded_image(const SampleField& f) { return f.is_array && f.dtype == "encoded"; }

EncodedImages::EncodedImages(const std::string& native_json, const ImageOptions& images, const std::string& source)
    : source_(source) {
  const nlohmann::json d = nlohmann::json::parse(native_json);
  const PipelineSpec spec = parse_pipeline(d.at("steps").dump());
  canonical_ = spec.canonical();
  output_ = d.value("output", std::string("float32")) == "uint8" ? "uint8" : "float32";
  pipeline_ = std::make_unique<Pipeline>(spec, PipelineSource{true, 3, 0, 0, images.max_image_pixels, &images.python});
  spdlog::info("{} returns tandem.Image: each image decoded and augmented in C++ ({}): {}", source, canonical_,
               printable(d.value("transform", std::string()), 300));
  const std::string in_python = d.value("in_python", std::string());
  if (!in_python.empty()) spdlog::info("{}: {}", source, printable(in_python, 400));
}

EncodedImages::~EncodedImages() = default;

void EncodedImages::learn(const SampleFields& sample0, uint64_t seed) {
  const SampleField* image = image_field(sample0);
  if (!image || !is_encoded_image(*image)) {
    throw ConfigError(source_ + ": sample 0 has no tandem.Image as its 'image', yet the dataset was described as one");
  }
  pipeline_->learn_output([&](uint8_t* out) {
    Rng rng(kAugmentStream, seed, 0, 0);
    pipeline_->run_file(bytes_of(*image), rng, out, 0);
  });
}

const SampleFields& EncodedImages::decoded(const SampleFields& fields, uint64_t seed, uint32_t epoch,
                                           uint64_t index) const {
  const SampleField* image = image_field(fields);
  if (!image || !is_encoded_image(*image)) return fields;
  thread_local std::vector<uint8_t> pixels;
  thread_local SampleFields out;
  pixels.resize(pipeline_->sample_bytes());
  Rng rng(kAugmentStream, seed, epoch, index);
  try {
    pipeline_->run_file(bytes_of(*image), rng, pixels.data(), index);
  } catch (const DecodeError& e) {
    throw PythonSampleError("sample " + std::to_string(index) + " of " + source_ +
                            ": its tandem.Image cannot be decoded: " + e.what());
  }
  out = fields;
  for (auto& [name, f] : out) {
    if (name != kImageField) continue;
    f.dtype = "uint8";
    f.shape = pipeline_->sample_shape();
    f.bytes = std::as_bytes(std::span<const uint8_t>(pixels));
  }
  return out;
}

}  // namespace tandem::data
