#include "tandem/data/sources/python_dataset.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/augment/rng.h"
#include "tandem/data/batching/thread_pool.h"
#include "tandem/data/sources/bad_samples.h"
#include "tandem/data/sources/file_dataset.h"

namespace tandem::data {
namespace fs = std::filesystem;
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

// "uint8 [3,8,8]", "an int (3)", "a float (0.5)", "a str".
std::string field_text(const SampleField& f) {
  if (f.is_array) return f.dtype + " " + shape_text(f.shape.value_or(std::vector<int64_t>{}));
  if (!f.shape) return "a " + f.dtype;
  if (f.dtype == "int64") return "an int (" + std::to_string(f.integer) + ")";
  if (f.dtype == "bool") return std::string("a bool (") + (f.integer ? "True" : "False") + ")";
  return "a float (" + std::to_string(f.real) + ")";
}

std::string image_problem(const SampleField& image, const std::vector<int64_t>& shape) {
  const std::string prefix = std::string(kPythonSampleSchema) + "; 'image' is ";
  if (!image.is_array || image.dtype != "uint8" || image.shape->size() != 3) {
    return prefix + field_text(image) + ": return a uint8 numpy array of [C,H,W] (e.g. np.asarray(pil).transpose(2, 0, 1))";
  }
  const auto& s = *image.shape;
  if (std::any_of(s.begin(), s.end(), [](int64_t d) { return d < 1; })) return prefix + "empty: " + field_text(image);
  if (!shape.empty() && s != shape) {
    return prefix + field_text(image) + ", the first sample's was " + shape_text(shape) +
           ": resize or crop every sample to one shape";
  }
  if (image.bytes.size() != static_cast<size_t>(s[0] * s[1] * s[2])) return prefix + "of the wrong size in bytes";
  return "";
}

}  // namespace

std::string python_sample_problem(const SampleFields& fields, const std::vector<int64_t>& shape) {
  const SampleField* image = nullptr;
  const SampleField* label = nullptr;
  for (const auto& [name, f] : fields) {
    if (name == "image") image = &f;
    else if (name == "label") label = &f;
    else {
      return std::string(kPythonSampleSchema) + "; field '" + printable(name, 60) + "' (" + field_text(f) +
             ") is not one of them: return only 'image' and 'label'";
    }
  }
  if (!image || !label) {
    return std::string(kPythonSampleSchema) + "; the sample has no '" + (image ? "label" : "image") + "'";
  }
  if (std::string problem = image_problem(*image, shape); !problem.empty()) return problem;
  if (label->is_array || label->dtype != "int64") {
    return std::string(kPythonSampleSchema) + "; 'label' is " + field_text(*label) + ": return a Python int";
  }
  return "";
}

uint64_t python_sample_seed(uint64_t seed, uint32_t epoch, uint64_t index) {
  return Rng(kAugmentStream, seed, epoch, index).next_u64();
}

namespace {

std::string hex64(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw ConfigError("cannot read " + path + " (--data python:FILE:NAME): check the path and its permissions");
  return text.str();
}

// {"python", FILE (absolute), NAME} from "python:FILE:NAME".
std::pair<std::string, std::string> file_and_name(const std::string& data) {
  const std::string rest = split_source(data).second;
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
    throw ConfigError("--data " + printable(data, 200) +
                      ": name the file and the class or function in it, e.g. python:my_data.py:Flowers");
  }
  const std::string file = rest.substr(0, colon);
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    throw ConfigError("--data " + printable(data, 200) + ": " + printable(file, 200) + " is not a file");
  }
  return {fs::absolute(file).lexically_normal().string(), rest.substr(colon + 1)};
}

std::string canonical_args(const std::string& args) {
  const nlohmann::json j = nlohmann::json::parse(args.empty() ? "{}" : args, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw ConfigError("--data-args " + printable(args, 200) +
                      " is not a JSON object: give the dataset's keyword arguments, like '{\"root\": \"/data\"}'");
  }
  return j.dump();  // keys sorted, no spaces
}

}  // namespace

PythonPoolOptions python_pool_options(const DataOptions& opts) {
  auto [file, name] = file_and_name(opts.data);
  const std::string args = canonical_args(opts.data_args);
  PythonPoolOptions p = python_runtime_options(opts);
  p.file = std::move(file);
  p.name = std::move(name);
  p.args_json = args;
  return p;
}

namespace {

class PythonDataset final : public Dataset {
 public:
  explicit PythonDataset(const DataOptions& opts)
      : seed_(opts.seed), shm_bytes_(opts.python_shm_bytes), policy_(parse_bad_sample_policy(opts.on_bad_sample)),
        pool_(python_pool_options(opts)) {
    const PythonPoolOptions& p = pool_.options();
    source_ = "python:" + p.file + ":" + p.name;
    info_.name = "python";
    info_.size = samples_per_epoch(opts, pool_.about().len, source_);
    info_.dtype = DType::kUInt8;
    learn_schema(opts);
    info_.description = "python/v1 code=" + hex64(fnv1a(read_file(p.file))) + " file=" +
                        fs::path(p.file).filename().string() + " name=" + p.name + " size=" + std::to_string(info_.size) +
                        " classes=" + std::to_string(info_.num_classes) + " seed=" + std::to_string(seed_) +
                        " args=" + p.args_json;
    info_.fingerprint = fingerprint_of(info_.description);
    spdlog::info("{}: {} samples of uint8 {} in {} classes, {} Python processes ({})", source_, info_.size,
                 shape_text(info_.sample_shape), info_.num_classes, p.procs, p.python);
  }

  const DatasetInfo& info() const override { return info_; }
  std::vector<std::string> skipped() const override { return skips_.entries(); }
  uint64_t skipped_count() const override { return skips_.count(); }
  uint64_t shared_memory_bytes() const override { return shm_bytes_; }

  int64_t produce(uint64_t index, uint32_t epoch, std::span<std::byte> out) const override {
    check_sample_index(index, info_);
    const uint64_t seed = python_sample_seed(seed_, epoch, index);
    const uint64_t len = pool_.about().len;
    uint64_t item = item_of(index, info_.size, len);
    for (uint64_t tries = 0;; ++tries) {
      std::string problem;
      try {
        return make(item, seed, out);
      } catch (const PythonSampleError& e) {
        problem = e.what();
      }
      if (policy_ == BadSamplePolicy::kFail) {
        throw DataError(problem + "\n(fix the dataset, or pass --on-bad-sample skip to use the next sample instead)");
      }
      const std::string which = describe(item);
      skips_.record(which, problem.rfind(which, 0) == 0 ? problem.substr(std::min(problem.size(), which.size() + 1)) : problem);
      if (tries + 1 >= std::min<uint64_t>(kMaxSubstituteTries, len)) {
        throw DataError("no usable sample among the " + std::to_string(tries + 1) + " from " + which + " on: fix the dataset");
      }
      item = (item + 1) % len;  // the substitute: the next sample, same random key
    }
  }

 private:
  std::string describe(uint64_t item) const { return "sample " + std::to_string(item) + " of " + source_; }

  // Writes dataset[item] into `out`; returns its label. Throws PythonSampleError.
  int64_t make(uint64_t item, uint64_t seed, std::span<std::byte> out) const {
    int64_t label = 0;
    std::string problem;
    pool_.run(item, seed, [&](const SampleFields& fields) {
      problem = python_sample_problem(fields, info_.sample_shape);
      if (!problem.empty()) return;
      for (const auto& [name, f] : fields) {
        if (name == "image") std::memcpy(out.data(), f.bytes.data(), std::min(out.size(), f.bytes.size()));
        if (name == "label") label = f.integer;
      }
      if (label < 0 || label >= info_.num_classes) problem = label_problem(label);
    });
    if (!problem.empty()) throw PythonSampleError(describe(item) + ": " + problem);
    return label;
  }

  std::string label_problem(int64_t label) const {
    return "label " + std::to_string(label) + " is outside the dataset's " + std::to_string(info_.num_classes) +
           " classes [0, " + std::to_string(info_.num_classes) + "): give the dataset a num_classes attribute or a " +
           "classes list, or pass --num-classes";
  }

  // Classes from the dataset (num_classes, or len(classes)), else --num-classes; the
  // image shape and a label from sample 0.
  void learn_schema(const DataOptions& opts) {
    const PythonDatasetAbout& about = pool_.about();
    info_.num_classes = static_cast<int>(about.num_classes.value_or(about.classes ? about.classes->size() : opts.num_classes));
    if (about.classes && about.classes->size() == static_cast<size_t>(info_.num_classes)) info_.class_names = *about.classes;
    if (info_.num_classes < 1) {
      throw ConfigError(source_ + " has " + std::to_string(info_.num_classes) +
                        " classes: give the dataset a num_classes attribute or a classes list, or pass --num-classes");
    }
    int64_t label = 0;
    std::string problem;
    try {
      pool_.run(0, python_sample_seed(seed_, 0, 0), [&](const SampleFields& fields) {
        problem = python_sample_problem(fields, {});
        for (const auto& [name, f] : fields) {
          if (name == "image" && f.shape) info_.sample_shape = *f.shape;
          if (name == "label") label = f.integer;
        }
      });
    } catch (const PythonSampleError& e) {
      throw ConfigError("cannot use " + source_ + ": " + e.what());
    }
    if (problem.empty() && (label < 0 || label >= info_.num_classes)) problem = label_problem(label);
    if (!problem.empty()) throw ConfigError("cannot use sample 0 of " + source_ + ": " + problem);
  }

  uint64_t seed_;
  uint64_t shm_bytes_;
  BadSamplePolicy policy_;
  PythonProcessPool pool_;
  std::string source_;
  DatasetInfo info_;
  mutable SkipLog skips_;
};

}  // namespace

std::shared_ptr<const Dataset> make_python_dataset(const DataOptions& opts) {
  return std::make_shared<PythonDataset>(opts);
}

}  // namespace tandem::data
