// "python:FILE:NAME": a user's own dataset, run by a pool of Python processes
// (data/python/process_pool.h). NAME in FILE is a class or function that, called with
// --data-args, returns an object with __len__ and __getitem__; a sample is a dict
// {"image": uint8 [C, H, W], "label": int} or an (image, label) tuple.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/data/sources/dataset.h"

namespace tandem::data {

// What a sample of a Python dataset must be today, in the words of every schema error.
inline constexpr const char* kPythonSampleSchema =
    "this tandem serves Python samples with 'image' (uint8 [C,H,W], the same shape for every sample) and "
    "'label' (int)";

// What is wrong with `fields` as a sample of the schema above whose images are `shape`
// (empty: the first sample, any [C,H,W]), naming the field, what was expected and what
// came; empty when nothing is.
std::string python_sample_problem(const SampleFields& fields, const std::vector<int64_t>& shape);

// The pool options `opts` asks for: FILE and NAME from opts.data, the arguments checked
// as a JSON object, the interpreter, processes (0 -> available_cores()), the timeout and
// the worker script (find_dataset_worker()). Throws ConfigError naming the bad setting.
PythonPoolOptions python_pool_options(const DataOptions& opts);

// The dataset: starts the pool, learns size (len(), or --dataset-size of it), the image
// shape from sample 0 (epoch 0) and the classes (the dataset's num_classes attribute or
// classes list, else --num-classes). Samples are uint8 CHW without normalisation. The
// fingerprint covers FILE's bytes, NAME, the arguments (canonical JSON), the seed and
// the size. Throws ConfigError with the Python error when the dataset cannot be built or
// sample 0 is unusable. produce() throws PythonSampleError (a DataError) for a bad
// sample under --on-bad-sample fail; under skip it uses the next index (same random key).
std::shared_ptr<const Dataset> make_python_dataset(const DataOptions& opts);

// The 64-bit seed of sample `index` in `epoch`: the first draw of the Rng keyed as the
// C++ pipeline keys a sample's augmentation (kAugmentStream, seed, epoch, index).
uint64_t python_sample_seed(uint64_t seed, uint32_t epoch, uint64_t index);

}  // namespace tandem::data
