// A batch's named fields as tensors (Torch world only): what a training_step model is
// handed. Every field of the dataset's schema by its name: dense fields as [N, ...]
// tensors of their dtype, as the dataset made them (an "image" in the dtype it travelled
// in: uint8 unless the workers set --wire-dtype; no scaling, no normalisation), "label"
// as int64 [N], and a ragged field NAME as three tensors, as tandem.Feed names them:
// NAME (the samples' rows concatenated, [total rows, ...]), NAME_lengths (int64 [N], each
// sample's row count) and NAME_offsets (int64 [N + 1], sample i is rows offsets[i] to
// offsets[i + 1]).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"

namespace tandem::training {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

torch::ScalarType scalar_type(data::DType dtype);

// Every field of `batch` (a batch of `info`'s schema, checked by data::batch_problem), in
// schema order, as CPU tensors over the batch's own memory (no copy) but for the small
// NAME_offsets, which are computed. They are valid while `batch` lives.
NamedTensors host_fields(data::Batch& batch, const data::DatasetInfo& info);

// Two zero samples of every field of `info`'s schema in the same form (a ragged field with
// one row in the first sample and two in the second), on the CPU: the batch a
// training_step model is checked on before training.
NamedTensors schema_batch(const data::DatasetInfo& info);

// "float32 [2, 4]": a tensor's dtype and shape, for errors.
std::string tensor_text(const torch::Tensor& t);

// "image uint8 [2, 3, 8, 8], boxes float32 [3, 4], boxes_lengths int64 [2], ...": what a
// batch holds, for errors.
std::string batch_text(const NamedTensors& batch);

}  // namespace tandem::training
