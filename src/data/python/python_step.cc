#include "tandem/data/python/python_step.h"

#include <algorithm>
#include <cstring>

#include "tandem/common/text.h"
#include "tandem/data/python/python_fields.h"

namespace tandem::data {
namespace {

std::string what_came(const SampleField& f) {
  if (f.is_array) return "a " + f.dtype + " array of shape " + shape_text(f.shape.value_or(std::vector<int64_t>{}));
  if (!f.shape) return "a " + f.dtype;
  return "a Python " + std::string(f.dtype == "float64" ? "float" : f.dtype == "bool" ? "bool" : "int");
}

// FUNCTION returned one array, not a dict (the pool names such a result "output").
bool is_single_array(const SampleFields& fields) { return fields.size() == 1 && fields[0].first == "output"; }

}  // namespace

PythonStep::PythonStep(PythonPoolOptions opts) : pool_(std::move(opts)) {}

size_t PythonStep::output_bytes() const {
  size_t n = 1;
  for (int64_t d : shape_) n *= static_cast<size_t>(d);
  return n;
}

// What is wrong with what FUNCTION returned, or "".
std::string PythonStep::problem(const SampleFields& fields) const {
  if (!schema_.empty()) {
    if (is_single_array(fields)) {
      return "it returned one array, and for sample 0 a dict of fields: return the same fields from every sample";
    }
    return python_sample_problem(fields, schema_, kStepRaggedFields);
  }
  const std::string expected = "a uint8 numpy array of shape " + shape_text(shape_) + " (the shape it returned for sample 0)";
  if (!is_single_array(fields)) return "it returned a dict of fields, and for sample 0 one array: return " + expected;
  const SampleField& f = fields[0].second;
  if (!f.is_array || f.dtype != "uint8" || !f.shape || *f.shape != shape_) return "it returned " + what_came(f) + ", expected " + expected;
  return "";
}

// Sample 0's output: one uint8 [C,H,W] array, or a dict of fields with an 'image' of that
// kind and no 'label' (the dataset's own). Returns "" or what is wrong with it.
std::string PythonStep::learn(const SampleFields& fields) const {
  if (is_single_array(fields)) {
    const SampleField& f = fields[0].second;
    const bool ok = f.is_array && f.dtype == "uint8" && f.shape && f.shape->size() == 3 &&
                    std::all_of(f.shape->begin(), f.shape->end(), [](int64_t d) { return d >= 1; });
    if (!ok) return "it returned " + what_came(f) + ", expected a uint8 numpy array [C,H,W] or a dict of fields";
    shape_ = *f.shape;
    return "";
  }
  std::vector<FieldSpec> schema;
  try {
    schema = python_schema(fields, pool_.about().ragged_fields, kStepRaggedFields);
  } catch (const ConfigError& e) {
    return e.what();
  }
  std::string names;
  for (const FieldSpec& s : schema) names += (names.empty() ? "'" : ", '") + printable(s.name, 40) + "'";
  if (schema.empty() || schema[0].name != kImageField) {
    return "it returned a dict of fields (" + names + ") without an 'image': return the sample's image, a uint8 " +
           "numpy array [C,H,W], as 'image' beside the other fields";
  }
  if (schema.size() > 1 && schema[1].name == kLabelField) {
    return "it returned a dict of fields (" + names + ") with a 'label': the label is the dataset's (its class " +
           "folder); return your own under another name";
  }
  extra_.assign(schema.begin() + 1, schema.end());
  shape_ = schema[0].shape;
  schema_ = std::move(schema);
  return "";
}

void PythonStep::write(const SampleFields& fields, uint8_t* out, const FieldsOut* extra) const {
  const auto image = std::span<std::byte>(reinterpret_cast<std::byte*>(out), output_bytes());
  if (!schema_.empty()) return write_python_fields(fields, schema_, image, extra);
  const SampleField& f = fields[0].second;
  std::memcpy(image.data(), f.bytes.data(), std::min(f.bytes.size(), image.size()));
}

void PythonStep::run(uint64_t index, uint64_t seed, std::span<const uint8_t> input,
                     const std::vector<int64_t>& in_shape, uint8_t* out, const FieldsOut* extra) const {
  std::string trouble;
  const bool learning = shape_.empty();
  pool_.call(index, seed, input, in_shape, [&](const SampleFields& fields) {
    if (learning) {
      trouble = learn(fields);  // the first call: learn, write nothing
      return;
    }
    trouble = problem(fields);
    if (trouble.empty()) write(fields, out, extra);
  });
  if (!trouble.empty()) throw PythonSampleError(pool_.describe(index) + ": " + trouble);
  if (learning) determinism_ = check_determinism(index, seed, input, in_shape);
}

// The sample FUNCTION learnt from, run twice in one process and once in another: any
// difference is a random source tandem does not seed.
std::string PythonStep::check_determinism(uint64_t index, uint64_t seed, std::span<const uint8_t> input,
                                          const std::vector<int64_t>& in_shape) const {
  if (pool_.unrepeatable({{index, seed, input, in_shape}}).empty()) return "";
  const PythonPoolOptions& o = pool_.options();
  return "--pipeline step python(" + o.file + ":" + o.name + ") is not deterministic: on sample " +
         std::to_string(index) + " it returned different bytes when run twice on the same image with the same " +
         "seed (in one process, and in two), so resuming, a rejoining worker and a re-sent request cannot give " +
         "the same bytes. It draws from a source tandem does not seed (os.urandom, secrets, the time, the " +
         "process id, state that changes between calls): draw from tandem.sample_rng(), random or numpy.random, " +
         "which tandem seeds per sample (docs/datasets.md, 'Seeding')";
}

}  // namespace tandem::data
