#include "tandem/data/python/python_step.h"

#include <algorithm>
#include <cstring>

#include "tandem/common/text.h"

namespace tandem::data {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string what_came(const SampleField& f) {
  if (f.is_array) return "a " + f.dtype + " array of shape " + shape_text(f.shape.value_or(std::vector<int64_t>{}));
  if (!f.shape) return "a " + f.dtype;
  return "a Python " + std::string(f.dtype == "float64" ? "float" : f.dtype == "bool" ? "bool" : "int");
}

}  // namespace

PythonStep::PythonStep(PythonPoolOptions opts) : pool_(std::move(opts)) {}

size_t PythonStep::output_bytes() const {
  size_t n = 1;
  for (int64_t d : shape_) n *= static_cast<size_t>(d);
  return n;
}

// What is wrong with what FUNCTION returned, or "".
std::string PythonStep::problem(const SampleFields& fields) const {
  const std::string expected = shape_.empty() ? std::string("a uint8 numpy array [C,H,W]")
                                              : "a uint8 numpy array of shape " + shape_text(shape_) +
                                                    " (the shape it returned for sample 0)";
  if (fields.size() != 1 || fields[0].first != "output") {
    std::string names;
    for (const auto& [name, f] : fields) names += (names.empty() ? "'" : ", '") + printable(name, 40) + "'";
    return "it returned a dict of fields (" + names + "), and this tandem's python() step takes one array; " +
           "fields from a step come with a later version: return " + expected;
  }
  const SampleField& f = fields[0].second;
  const bool ok = f.is_array && f.dtype == "uint8" && f.shape && f.shape->size() == 3 &&
                  std::all_of(f.shape->begin(), f.shape->end(), [](int64_t d) { return d >= 1; }) &&
                  (shape_.empty() || *f.shape == shape_);
  if (!ok) return "it returned " + what_came(f) + ", expected " + expected;
  return "";
}

void PythonStep::run(uint64_t index, uint64_t seed, std::span<const uint8_t> input,
                     const std::vector<int64_t>& in_shape, uint8_t* out) const {
  std::string trouble;
  pool_.call(index, seed, input, in_shape, [&](const SampleFields& fields) {
    trouble = problem(fields);
    if (!trouble.empty()) return;
    const SampleField& f = fields[0].second;
    if (shape_.empty()) {
      shape_ = *f.shape;  // the first call: learn, write nothing
      return;
    }
    std::memcpy(out, f.bytes.data(), std::min(f.bytes.size(), output_bytes()));
  });
  if (!trouble.empty()) throw PythonSampleError(pool_.describe(index) + ": " + trouble);
}

}  // namespace tandem::data
