// A Python sample's fields against the schema learnt from sample 0: what they become,
// what is wrong with one, and how they are copied into a batch; and the per-sample seed.
#include "tandem/data/python/python_fields.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/core/rng.h"

namespace tandem::data {

namespace {

// "uint8 [3,8,8]", "an int (3)", "a float (0.5)", "a str".
std::string field_text(const SampleField& f) {
  if (f.is_array) return f.dtype + " " + shape_text(f.shape.value_or(std::vector<int64_t>{}));
  if (!f.shape) return "a " + f.dtype;
  if (f.dtype == "int64") return "an int (" + std::to_string(f.integer) + ")";
  if (f.dtype == "bool") return std::string("a bool (") + (f.integer ? "True" : "False") + ")";
  return "a float (" + std::to_string(f.real) + ")";
}

// The DType of a numpy dtype name this tandem carries, or none.
std::optional<DType> field_dtype(const std::string& numpy) {
  for (DType d : {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat16, DType::kFloat32}) {
    if (numpy == dtype_name(d)) return d;
  }
  return std::nullopt;
}

// "'mask' is uint8 [8,8]": how errors start.
std::string is_text(const std::string& name, const SampleField& f) {
  return "'" + printable(name, 60) + "' is " + field_text(f);
}

// The spec sample 0's field gives, or throws ConfigError.
FieldSpec spec_of(const std::string& name, const SampleField& f, bool ragged) {
  auto fail = [&](const std::string& fix) {
    return ConfigError(std::string(kPythonSampleSchema) + "; " + is_text(name, f) + ": " + fix);
  };
  FieldSpec spec{name, DType::kInt64, {}};
  if (!f.shape) throw fail("return a numpy array, an int or a float");
  if (!f.is_array) {
    if (f.dtype == "bool") throw fail("return an int (int(value))");
    if (ragged) throw fail("a ragged field is an array whose first dimension varies: return one");
    spec.dtype = f.dtype == "int64" ? DType::kInt64 : DType::kFloat32;
  } else {
    if (f.dtype == "encoded") {
      throw fail("a tandem.Image is decoded by tandem only as the 'image' of a dataset with a `transform` attribute "
                 "(docs/datasets.md, \"tandem.Image\")");
    }
    const std::optional<DType> dtype = field_dtype(f.dtype);
    if (!dtype) throw fail("convert it to uint8, int32, int64, float16 or float32 (e.g. .astype(np.float32))");
    spec.dtype = *dtype;
    spec.shape = *f.shape;
    if (ragged && spec.shape.empty()) throw fail("a ragged field needs a first dimension: return an array of rows");
    if (ragged) spec.shape[0] = -1;
  }
  if (name == kImageField &&
      (ragged || (spec.dtype != DType::kUInt8 && spec.dtype != DType::kFloat32) || spec.shape.size() != 3 ||
       std::any_of(spec.shape.begin(), spec.shape.end(), [](int64_t d) { return d < 1; }))) {
    throw fail("'image' is what tandem's trainer classifies: return a non-empty uint8 or float32 array of [C,H,W] "
               "(e.g. np.asarray(pil).transpose(2, 0, 1), or ToTensor()'s tensor), or give the field another name");
  }
  if (name == kLabelField && (spec.dtype != DType::kInt64 || !spec.shape.empty())) {
    throw fail("'label' is the class tandem's trainer learns: return a Python int, or give the field another name");
  }
  return spec;
}

// What is wrong with field `f` of a later sample against `spec`.
std::string field_problem(const std::string& name, const SampleField& f, const FieldSpec& spec,
                          std::string_view ragged_owner) {
  bool fits = f.shape.has_value() && f.is_array == !spec.shape.empty() && (f.is_array || f.dtype == "int64" ||
                                                                          (f.dtype == "float64" && spec.dtype == DType::kFloat32));
  if (fits && f.is_array) {
    const auto& s = *f.shape;
    fits = field_dtype(f.dtype) == spec.dtype && s.size() == spec.shape.size() &&
           std::equal(s.begin() + (spec.ragged() ? 1 : 0), s.end(), spec.shape.begin() + (spec.ragged() ? 1 : 0));
    size_t bytes = dtype_size(spec.dtype);
    for (int64_t d : s) bytes *= d < 0 ? 0 : static_cast<size_t>(d);
    if (fits && bytes != f.bytes.size()) return is_text(name, f) + " of the wrong size in bytes";
  }
  if (fits) return "";
  std::string expected = spec.shape.empty() ? (spec.dtype == DType::kInt64 ? "an int" : "a float")
                                            : std::string(dtype_name(spec.dtype)) + " " + shape_text(spec.shape);
  std::string fix = spec.shape.empty() ? "return the first sample's kind of value"
                                       : "return the first sample's dtype and shape";
  if (!spec.ragged() && f.is_array && field_dtype(f.dtype) == spec.dtype) {
    fix = "resize or crop every sample to one shape, or, if its first dimension varies (boxes, tokens), name '" +
          printable(name, 60) + "' in " + std::string(ragged_owner);
  }
  return is_text(name, f) + ", the first sample's was " +
         (spec.shape.empty() ? expected : shape_text(spec.shape) + " (" + expected + ")") + ": " + fix;
}

std::string names_text(const std::vector<FieldSpec>& schema) {
  std::string out;
  for (const FieldSpec& s : schema) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

}  // namespace

std::vector<FieldSpec> python_schema(const SampleFields& fields, const std::vector<std::string>& ragged,
                                     std::string_view ragged_owner) {
  std::vector<FieldSpec> schema;
  for (const auto& [name, f] : fields) {
    schema.push_back(spec_of(name, f, std::find(ragged.begin(), ragged.end(), name) != ragged.end()));
  }
  // image and label first, then the others by name: one order whatever order the sample
  // (and the JSON between the processes) gave them in.
  auto rank = [](const FieldSpec& s) { return s.name == kImageField ? 0 : s.name == kLabelField ? 1 : 2; };
  std::stable_sort(schema.begin(), schema.end(), [&](const FieldSpec& a, const FieldSpec& b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a.name < b.name;
  });
  for (const std::string& r : ragged) {
    if (std::none_of(schema.begin(), schema.end(), [&](const FieldSpec& s) { return s.name == r; })) {
      throw ConfigError(std::string(ragged_owner) + " names '" + printable(r, 60) + "', which sample 0 does not have (" +
                        names_text(schema) + "): name only fields it returns");
    }
  }
  DatasetInfo check;  // names, duplicates (NAME_lengths), ranks and sizes, as a trainer checks them
  check.fields = schema;
  check.dtype = DType::kUInt8;
  for (const FieldSpec& s : schema) {
    if (s.name == kImageField) std::tie(check.sample_shape, check.dtype) = std::tie(s.shape, s.dtype);
  }
  if (std::string problem = schema_problem(check); !problem.empty()) {
    throw ConfigError("sample 0's fields (" + names_text(schema) + ") have " + problem + ": rename or reshape it");
  }
  return schema;
}

std::string python_sample_problem(const SampleFields& fields, const std::vector<FieldSpec>& schema,
                                  std::string_view ragged_owner) {
  for (const auto& field : fields) {  // not a structured binding: clang 14 (the fuzz build) cannot capture one
    const std::string& name = field.first;
    const SampleField& f = field.second;
    if (std::none_of(schema.begin(), schema.end(), [&](const FieldSpec& s) { return s.name == name; })) {
      return "field " + is_text(name, f) + " but the first sample had no '" + printable(name, 60) + "' (it had " +
             names_text(schema) + "): return the same fields from every sample";
    }
  }
  for (const FieldSpec& spec : schema) {
    const auto f = std::find_if(fields.begin(), fields.end(), [&](const auto& nf) { return nf.first == spec.name; });
    if (f == fields.end()) {
      return "the sample has no '" + spec.name + "', which the first sample had (" + field_spec_text(spec) +
             "): return the same fields from every sample";
    }
    if (std::string problem = field_problem(spec.name, f->second, spec, ragged_owner); !problem.empty()) return problem;
  }
  return "";
}

uint64_t python_sample_seed(uint64_t seed, uint32_t epoch, uint64_t index) {
  return Rng(kAugmentStream, seed, epoch, index).next_u64();
}

void write_python_fields(const SampleFields& fields, const std::vector<FieldSpec>& schema, std::span<std::byte> image,
                         const FieldsOut* extra) {
  size_t e = 0;
  for (const FieldSpec& spec : schema) {
    const SampleField& f = std::find_if(fields.begin(), fields.end(), [&](const auto& nf) {
                             return nf.first == spec.name;
                           })->second;  // python_sample_problem saw every field there
    if (spec.name == kLabelField) continue;
    if (spec.name == kImageField) {
      std::memcpy(image.data(), f.bytes.data(), std::min(image.size(), f.bytes.size()));
      continue;
    }
    if (!extra) continue;
    const size_t at = e++;
    int64_t integer = f.integer;
    float real = static_cast<float>(f.real);
    std::span<const std::byte> bytes = f.bytes;
    if (!f.is_array) {
      bytes = spec.dtype == DType::kInt64 ? std::as_bytes(std::span<const int64_t>(&integer, 1))
                                          : std::as_bytes(std::span<const float>(&real, 1));
    }
    if (std::vector<std::byte>* rows = extra->ragged[at]) {
      rows->insert(rows->end(), bytes.begin(), bytes.end());
    } else {
      std::memcpy(extra->dense[at].data(), bytes.data(), std::min(bytes.size(), extra->dense[at].size()));
    }
  }
}

}  // namespace tandem::data
