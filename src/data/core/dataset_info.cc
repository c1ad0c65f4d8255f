// DatasetInfo and the rules a schema and a peer's description of a dataset must keep.
#include "tandem/data/core/dataset.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "tandem/common/text.h"

namespace tandem::data {
namespace {

bool name_is_usable(const std::string& name) {
  if (name.empty() || name.size() > 100) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// What is wrong with one field of a schema (its name, rank and dimensions).
std::string spec_problem(const FieldSpec& f) {
  if (!name_is_usable(f.name)) return "a field named '" + printable(f.name, 60) + "' (use letters, digits, _ . -)";
  if (f.shape.size() > 8) return "field '" + f.name + "' of " + std::to_string(f.shape.size()) + " dimensions";
  for (size_t i = 0; i < f.shape.size(); ++i) {
    const int64_t d = f.shape[i];
    if (d < (i == 0 ? -1 : 0) || d > (int64_t{1} << 31)) {
      return "field '" + f.name + "' of shape " + shape_text(f.shape);
    }
  }
  return {};
}

}  // namespace

std::string classification_problem(const DatasetInfo& info) {
  if (info.has_image() && info.has_label()) return {};
  std::string names;
  for (const FieldSpec& f : info.schema()) names += (names.empty() ? "" : ", ") + field_spec_text(f);
  return "dataset '" + info.name + "' has no '" + (info.has_image() ? kLabelField : kImageField) +
         "' field (its fields: " + names + "): tandem's built-in models, and TorchScript models without a "
         "training_step, classify 'image' (uint8 [C,H,W]) by 'label' (an int). To train on any fields, give --model a "
         "TorchScript module with training_step(self, batch: Dict[str, Tensor]) -> Tensor returning the loss "
         "(docs/models.md), or read these batches with tandem.Feed in your own training script (docs/python.md)";
}

std::string schema_problem(const DatasetInfo& info) {
  if (info.fields.empty()) return {};  // image and label, as sample_shape and num_classes say
  if (info.fields.size() > 64) return std::to_string(info.fields.size()) + " fields";
  std::vector<std::string> names;
  for (const FieldSpec& f : info.fields) {
    if (std::string problem = spec_problem(f); !problem.empty()) return problem;
    names.push_back(f.name);
    if (f.ragged()) {
      names.push_back(f.name + "_lengths");
      names.push_back(f.name + "_offsets");
    }
  }
  std::sort(names.begin(), names.end());
  if (const auto dup = std::adjacent_find(names.begin(), names.end()); dup != names.end()) {
    return "two fields named '" + *dup + "'";
  }
  const std::vector<FieldSpec> schema = info.schema();
  const auto image = std::find_if(schema.begin(), schema.end(), [](const FieldSpec& f) { return f.name == kImageField; });
  if ((image == schema.end()) != info.sample_shape.empty() ||
      (image != schema.end() && (image->shape != info.sample_shape || image->dtype != info.dtype))) {
    return "an 'image' field that disagrees with its sample shape " + shape_text(info.sample_shape);
  }
  const auto label = std::find_if(schema.begin(), schema.end(), [](const FieldSpec& f) { return f.name == kLabelField; });
  if (label != schema.end() && (label->dtype != DType::kInt64 || !label->shape.empty())) {
    return "a 'label' field " + field_spec_text(*label) + ", not int64 []";
  }
  return {};
}

namespace {

// The class count and names: none without a label.
std::string label_problem(const DatasetInfo& info) {
  constexpr int kMaxClasses = 1 << 24;
  if (!info.has_label()) {
    if (info.num_classes != 0 || !info.class_names.empty()) return "classes without a 'label' field";
    return "";
  }
  if (info.num_classes < 1 || info.num_classes > kMaxClasses) {
    return "a class count of " + std::to_string(info.num_classes) + " (a worker of an older tandem does not say it)";
  }
  if (!info.class_names.empty() && info.class_names.size() != static_cast<size_t>(info.num_classes)) {
    return std::to_string(info.class_names.size()) + " class names for " + std::to_string(info.num_classes) +
           " classes";
  }
  for (const std::string& name : info.class_names) {
    if (name.empty() || name.size() > 255) {  // NAME_MAX: no folder has a longer name
      return "a class name of " + std::to_string(name.size()) + " bytes";
    }
  }
  return "";
}

}  // namespace

std::string info_problem(const DatasetInfo& info) {
  constexpr int64_t kMaxSide = 1 << 16;
  if (info.name.empty() || info.name.size() > 200) return "no usable dataset name";
  if (info.fingerprint.empty()) return "no fingerprint";
  if (info.size == 0 || info.size > (uint64_t{1} << 32)) return "size " + std::to_string(info.size) + " samples";
  if (std::string problem = schema_problem(info); !problem.empty()) return problem;
  if (!info.has_image()) {
    return info.mean.empty() && info.std.empty() ? label_problem(info) : "a normalisation without an image";
  }
  if (info.sample_shape.size() != 3) return "a sample shape of " + std::to_string(info.sample_shape.size()) + " dimensions, not [C, H, W]";
  for (int64_t d : info.sample_shape) {
    if (d < 1 || d > kMaxSide) return "a sample dimension of " + std::to_string(d);
  }
  if (info.sample_shape[0] > 64) return std::to_string(info.sample_shape[0]) + " channels";
  if (std::string problem = label_problem(info); !problem.empty()) return problem;
  const auto channels = static_cast<size_t>(info.sample_shape[0]);
  if (info.mean.size() != info.std.size() || (!info.mean.empty() && info.mean.size() != channels)) {
    return "normalisation for " + std::to_string(info.mean.size()) + " channels (mean) and " +
           std::to_string(info.std.size()) + " (std), not " + std::to_string(channels);
  }
  for (size_t c = 0; c < info.mean.size(); ++c) {
    if (!std::isfinite(info.mean[c]) || !std::isfinite(info.std[c]) || info.std[c] <= 0) {
      return "a normalisation with mean " + std::to_string(info.mean[c]) + ", std " + std::to_string(info.std[c]);
    }
  }
  return "";
}

size_t DatasetInfo::sample_bytes() const {
  if (sample_shape.empty()) return 0;
  size_t n = dtype_size(dtype);
  for (int64_t d : sample_shape) n *= static_cast<size_t>(d);
  return n;
}

std::vector<FieldSpec> DatasetInfo::schema() const {
  if (!fields.empty()) return fields;
  return {FieldSpec{kImageField, dtype, sample_shape}, FieldSpec{kLabelField, DType::kInt64, {}}};
}

bool DatasetInfo::has_image() const {
  if (fields.empty()) return true;
  return std::any_of(fields.begin(), fields.end(), [](const FieldSpec& f) { return f.name == kImageField; });
}

bool DatasetInfo::has_label() const {
  if (fields.empty()) return true;
  return std::any_of(fields.begin(), fields.end(), [](const FieldSpec& f) { return f.name == kLabelField; });
}

void DatasetInfo::add_fields(const std::vector<FieldSpec>& extra) {
  if (extra.empty()) return;
  std::vector<FieldSpec> all = schema();
  all.insert(all.end(), extra.begin(), extra.end());
  fields = std::move(all);
}

std::vector<FieldSpec> DatasetInfo::extra_fields() const {
  std::vector<FieldSpec> out;
  for (const FieldSpec& f : fields) {
    if (f.name != kImageField && f.name != kLabelField) out.push_back(f);
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace tandem::data
