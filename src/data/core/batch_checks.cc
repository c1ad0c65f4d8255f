// batch_problem: what is wrong with a batch a source sent, against its dataset's info.
#include "tandem/data/core/dataset.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "tandem/common/text.h"

namespace tandem::data {

namespace {

// What is wrong with `f` as the batch's field for `spec` in a batch of `n` samples.
std::string field_problem(const Field& f, const FieldSpec& spec, size_t n) {
  if (f.name != spec.name || f.dtype != spec.dtype) {
    return "field '" + printable(f.name, 60) + "' " + dtype_name(f.dtype) + " where the schema has " +
           field_spec_text(spec);
  }
  std::vector<int64_t> expected{static_cast<int64_t>(n)};
  expected.insert(expected.end(), spec.shape.begin() + (spec.ragged() ? 1 : 0), spec.shape.end());
  if (spec.ragged()) {
    int64_t rows = 0;
    for (const int64_t l : f.lengths) rows += l < 0 || l > (int64_t{1} << 40) ? (int64_t{1} << 41) : l;
    expected[0] = rows;
    if (f.lengths.size() != n) {
      return "ragged field '" + spec.name + "' with " + std::to_string(f.lengths.size()) + " lengths for " +
             std::to_string(n) + " samples";
    }
  } else if (!f.lengths.empty()) {
    return "dense field '" + spec.name + "' with lengths";
  }
  if (f.shape != expected) {
    return "field '" + spec.name + "' of shape " + shape_text(f.shape) + " where the schema (" +
           field_spec_text(spec) + ") and its lengths give " + shape_text(expected);
  }
  if (f.data.size() != f.expected_bytes()) {
    return "field '" + spec.name + "' of " + std::to_string(f.data.size()) + " bytes for its shape " +
           shape_text(f.shape) + " (expected " + std::to_string(f.expected_bytes()) + ")";
  }
  return {};
}

std::string fields_problem(const Batch& batch, const DatasetInfo& info, size_t n) {
  const std::vector<FieldSpec> extra = info.extra_fields();
  if (batch.fields.size() != extra.size()) {
    return std::to_string(batch.fields.size()) + " extra fields where the schema has " + std::to_string(extra.size());
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    if (std::string problem = field_problem(batch.fields[i], extra[i], n); !problem.empty()) return problem;
  }
  return {};
}

std::string image_problem(const Batch& batch, const DatasetInfo& info) {
  if (!info.has_image()) {
    if (batch.shape.size() != 1 || batch.data.size() != 0) return "an image payload the dataset has no 'image' for";
    return {};
  }
  const auto& s = info.sample_shape;
  if (batch.shape.size() != s.size() + 1 || !std::equal(s.begin(), s.end(), batch.shape.begin() + 1)) {
    return "the wrong sample shape for dataset '" + info.name + "'";
  }
  const auto n = static_cast<size_t>(batch.size());
  const size_t bytes = n * (info.sample_bytes() / dtype_size(info.dtype)) * dtype_size(batch.dtype);
  if (batch.data.size() != bytes) {
    return std::to_string(batch.data.size()) + " bytes for " + std::to_string(n) + " " + dtype_name(batch.dtype) +
           " samples (expected " + std::to_string(bytes) + ")";
  }
  return {};
}

}  // namespace

std::string batch_problem(const Batch& batch, const DatasetInfo& info) {
  const std::string which = "batch " + std::to_string(batch.sequence);
  if (batch.shape.empty()) return which + " has no shape";
  if (std::string problem = image_problem(batch, info); !problem.empty()) return which + " has " + problem;
  const auto n = static_cast<size_t>(batch.size());
  const size_t labels = info.has_label() ? n : 0;
  if (batch.labels.size() != labels) {
    return which + " has " + std::to_string(batch.labels.size()) + " labels for " + std::to_string(n) + " samples";
  }
  for (const int64_t label : batch.labels) {
    if (label < 0 || label >= info.num_classes) {
      return which + " has label " + std::to_string(label) + ", outside the dataset's " +
             std::to_string(info.num_classes) + " classes";
    }
  }
  if (std::string problem = fields_problem(batch, info, n); !problem.empty()) return which + " has " + problem;
  return {};
}

}  // namespace tandem::data
