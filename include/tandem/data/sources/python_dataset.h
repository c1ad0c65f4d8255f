// "python:FILE:NAME": a user's own dataset, run by a pool of Python processes
// (data/python/process_pool.h). NAME in FILE is a class or function that, called with
// --data-args, returns an object with __len__ and __getitem__; a sample is a dict of
// named fields (kPythonSampleSchema), e.g. {"image": uint8 [C, H, W], "label": int}, or
// an (image, label) tuple.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <span>
#include <vector>

#include "tandem/data/core/dataset.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/data/python/python_fields.h"
#include "tandem/data/sources/image_options.h"

namespace tandem::data {

// What a Python dataset takes from the settings (source_kinds.h python_dataset_options()).
struct PythonDatasetOptions {
  std::string data;              // --data python:FILE:NAME
  std::string data_args = "{}";  // --data-args: NAME's keyword arguments, a JSON object
  uint64_t seed = 0;             // --seed
  uint64_t dataset_size = 0;     // --dataset-size: 0 = len()
  int num_classes = 10;          // --num-classes, when the dataset does not say
  std::string on_bad_sample = "fail";  // --on-bad-sample
  PythonRuntime python;          // its processes
  bool native = true;            // --python-native auto: a torchvision image folder made in C++
};

// The pool options `opts` asks for: FILE and NAME from opts.data, the arguments checked
// as a JSON object, the interpreter, processes (0 -> available_cores()), the timeout and
// the worker script (find_dataset_worker()). Throws ConfigError naming the bad setting.
PythonPoolOptions python_pool_options(const PythonDatasetOptions& opts);

// The dataset: starts the pool, learns size (len(), or --dataset-size of it), the schema
// from sample 0 (epoch 0; python_schema) and, where there is a 'label', the classes (the
// dataset's num_classes attribute or classes list, else --num-classes). Images are uint8
// CHW without normalisation; the other fields travel as Batch::fields. The
// fingerprint covers FILE's bytes, NAME, the arguments (canonical JSON), the seed and
// the size. Throws ConfigError with the Python error when the dataset cannot be built or
// sample 0 is unusable. produce() throws PythonSampleError (a DataError) for a bad
// sample under --on-bad-sample fail; under skip it uses the next index (same random key).
// The dataset python:FILE:NAME makes: served by its Python processes, or, for a torchvision
// image folder tandem can make itself (python/tandem/_torchvision_native.py), made natively
// with `images`' settings and the steps its transform translates to (torchvision_folder.h).
std::shared_ptr<const Dataset> make_python_dataset(const PythonDatasetOptions& opts, const ImageOptions& images);

}  // namespace tandem::data
