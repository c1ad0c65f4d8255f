// The python(FILE:FUNCTION) step of --pipeline: FUNCTION in FILE takes the uint8 [C,H,W]
// array the C++ steps made and returns either a uint8 [C,H,W] array of one fixed shape (the
// sample's image) or a dict of named fields whose 'image' is that array and whose other
// fields (a mask, boxes, numbers) travel beside it, as a Python dataset's fields do. What
// it returns is learned from sample 0, as a Python dataset learns its schema. It runs in a
// pool of Python processes (process_pool.h, Kind::kFunction), seeded per sample from the
// same key as a Python dataset's samples.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/python/process_pool.h"

namespace tandem::data {

class PythonStep {
 public:
  // Starts the processes: each imports `opts.file` and finds `opts.name`. Throws
  // ConfigError with the Python error (an import error, no such function, not callable).
  // REQUIRES: opts.kind == Kind::kFunction.
  explicit PythonStep(PythonPoolOptions opts);

  // Runs FUNCTION on sample `index`'s `input` (uint8 of `in_shape`) seeded with `seed`
  // and writes what it returned: the image into `out` (output_bytes()), and with a dict,
  // its other fields into `extra` (extra_fields() order; ignored when null). The first
  // call (sample 0, at start, one thread) learns what FUNCTION returns and writes nothing.
  // Throws PythonSampleError (a bad sample) when FUNCTION raises, or returns something
  // other than sample 0 did (or, at sample 0, neither a uint8 [C,H,W] array nor a dict
  // of fields with one); the message names what came and what was expected. Nothing is
  // written for a bad sample. Thread-safe after the first call.
  void run(uint64_t index, uint64_t seed, std::span<const uint8_t> input, const std::vector<int64_t>& in_shape,
           uint8_t* out, const FieldsOut* extra = nullptr) const;

  bool learned() const { return !shape_.empty(); }
  // Users' code must be deterministic: once learned, "" when FUNCTION returned the same
  // bytes for the first sample run twice in one process and once in another, else what
  // differs and what to fix.
  const std::string& determinism_problem() const { return determinism_; }
  // The image's shape [C,H,W].
  const std::vector<int64_t>& output_shape() const { return shape_; }
  size_t output_bytes() const;
  // A returned dict's fields other than 'image', in schema order (python_schema); empty
  // when FUNCTION returns one array.
  const std::vector<FieldSpec>& extra_fields() const { return extra_; }
  const PythonProcessPool& pool() const { return pool_; }

 private:
  std::string problem(const SampleFields& fields) const;
  std::string learn(const SampleFields& fields) const;
  void write(const SampleFields& fields, uint8_t* out, const FieldsOut* extra) const;
  std::string check_determinism(uint64_t index, uint64_t seed, std::span<const uint8_t> input,
                                const std::vector<int64_t>& in_shape) const;

  PythonProcessPool pool_;
  // Set once, by the first run(): the image's shape, and with a dict, its whole schema.
  mutable std::vector<int64_t> shape_;
  mutable std::vector<FieldSpec> schema_;
  mutable std::vector<FieldSpec> extra_;
  mutable std::string determinism_;  // set with them
};

}  // namespace tandem::data
