// The python(FILE:FUNCTION) step of --pipeline: FUNCTION in FILE takes the uint8 [C,H,W]
// array the C++ steps made and returns a uint8 [C,H,W] array of one fixed shape, learned
// from sample 0 as a Python dataset learns its schema. It runs in a pool of Python
// processes (process_pool.h, Kind::kFunction), seeded per sample from the same key as a
// Python dataset's samples.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tandem/data/python/process_pool.h"

namespace tandem::data {

class PythonStep {
 public:
  // Starts the processes: each imports `opts.file` and finds `opts.name`. Throws
  // ConfigError with the Python error (an import error, no such function, not callable).
  // REQUIRES: opts.kind == Kind::kFunction.
  explicit PythonStep(PythonPoolOptions opts);

  // Runs FUNCTION on sample `index`'s `input` (uint8 of `in_shape`) seeded with `seed`
  // and writes what it returned into `out` (output_bytes()). The first call (sample 0, at
  // start, one thread) learns the output shape and writes nothing. Throws
  // PythonSampleError (a bad sample) when FUNCTION raises, or returns anything but a
  // uint8 [C,H,W] array of the learned shape; the message names what came and what was
  // expected. Thread-safe after the first call.
  void run(uint64_t index, uint64_t seed, std::span<const uint8_t> input, const std::vector<int64_t>& in_shape,
           uint8_t* out) const;

  bool learned() const { return !shape_.empty(); }
  const std::vector<int64_t>& output_shape() const { return shape_; }
  size_t output_bytes() const;
  const PythonProcessPool& pool() const { return pool_; }

 private:
  std::string problem(const SampleFields& fields) const;

  PythonProcessPool pool_;
  mutable std::vector<int64_t> shape_;  // set once, by the first run()
};

}  // namespace tandem::data
