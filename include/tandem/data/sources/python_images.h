// A Python dataset whose 'image' field is a tandem.Image (an encoded JPEG or PNG, from a
// path or bytes) it cannot list at start (docs/datasets.md, "tandem.Image"): each sample's
// fields come from its Python code, and its image is decoded and augmented here, in C++,
// with the steps the dataset's `transform` translates to (python/tandem/_native_parts.py),
// keyed by (seed, epoch, index) as a stored image is: the same bytes as the listed path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/data/augment/pipeline.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/data/sources/image_options.h"

namespace tandem::data {

class EncodedImages {
 public:
  // `native_json`: the first process's description ({"steps", "transform", "in_python"}).
  // Throws ConfigError when the steps do not compile.
  EncodedImages(const std::string& native_json, const ImageOptions& images, const std::string& source);
  ~EncodedImages();

  // Sample 0's fields: learns what a python() part of the pipeline returns (its shape).
  void learn(const SampleFields& sample0, uint64_t seed);
  // `fields` with an encoded 'image' decoded and augmented for sample `index` of `epoch`;
  // the others as they are. The result is valid until the next call on this thread.
  // Throws PythonSampleError (a bad sample) when the image cannot be decoded.
  const SampleFields& decoded(const SampleFields& fields, uint64_t seed, uint32_t epoch, uint64_t index) const;

  const Pipeline& pipeline() const { return *pipeline_; }
  std::string canonical() const { return canonical_; }
  // What the dataset's transform ends in: "float32" (ToTensor) or "uint8" (PILToTensor).
  const std::string& output() const { return output_; }

 private:
  std::string source_, canonical_, output_;
  std::unique_ptr<Pipeline> pipeline_;
};

// True when field `f` is a tandem.Image's encoded bytes.
bool is_encoded_image(const SampleField& f);

}  // namespace tandem::data
