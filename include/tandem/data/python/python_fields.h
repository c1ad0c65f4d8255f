// A Python sample's fields (a dict from the user's code, a python() step's output)
// against the schema learnt from sample 0: what they become, what is wrong with one, how
// they are copied into a batch; and the per-sample seed. Shared by python:FILE:NAME
// datasets (sources/python_dataset.h) and python() pipeline steps (python_step.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/data/core/dataset.h"
#include "tandem/data/python/process_pool.h"

namespace tandem::data {

// What a sample of a Python dataset may be, in the words of every schema error.
inline constexpr const char* kPythonSampleSchema =
    "a sample is a dict of named fields, each a numpy array of uint8, int32, int64, float16 or float32 (one "
    "shape in every sample, or a first dimension that varies for a field named in the dataset's ragged_fields), "
    "a Python int (int64) or a Python float (float32); 'image', if any, is uint8 [C,H,W] and 'label', if any, an int";

// Who names the ragged fields, in the errors below: a Python dataset's class attribute, or
// the attribute of a python() step's function.
inline constexpr const char* kDatasetRaggedFields = "the dataset's ragged_fields";
inline constexpr const char* kStepRaggedFields = "the function's ragged_fields attribute";

// The schema sample 0's `fields` give, 'image' and 'label' first, then the others by
// name: arrays as they came (a field named
// in `ragged` with -1 for its first dimension), ints as int64 [], floats as float32 [].
// Throws ConfigError naming the field, what it is and what would do (kPythonSampleSchema);
// `ragged_owner` says where `ragged` came from (kDatasetRaggedFields, kStepRaggedFields).
std::vector<FieldSpec> python_schema(const SampleFields& fields, const std::vector<std::string>& ragged,
                                     std::string_view ragged_owner = kDatasetRaggedFields);

// What is wrong with `fields` as a sample of `schema` (a field missing, one too many, a
// dtype or shape that differs), naming the field, what was expected and what came; empty
// when nothing is.
std::string python_sample_problem(const SampleFields& fields, const std::vector<FieldSpec>& schema,
                                  std::string_view ragged_owner = kDatasetRaggedFields);

// Copies a sample's fields, checked by python_sample_problem against `schema`, into place:
// 'image' into `image`, each other field but 'label' into `extra` in schema order (a dense
// field into its row, a ragged one appended to its rows); nothing into `extra` when null.
void write_python_fields(const SampleFields& fields, const std::vector<FieldSpec>& schema, std::span<std::byte> image,
                         const FieldsOut* extra);

// The 64-bit seed of sample `index` in `epoch`: the first draw of the Rng keyed as the
// C++ pipeline keys a sample's augmentation (kAugmentStream, seed, epoch, index).
uint64_t python_sample_seed(uint64_t seed, uint32_t epoch, uint64_t index);

}  // namespace tandem::data
