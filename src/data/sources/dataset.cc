#include "tandem/data/sources/dataset.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/augment/pipeline_spec.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/sources/image_folder.h"
#include "tandem/data/sources/manifest.h"
#include "tandem/data/sources/mnist.h"
#include "tandem/data/sources/python_dataset.h"
#include "tandem/data/sources/synthetic.h"
#include "tandem/data/sources/webdataset.h"

namespace tandem::data {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

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

namespace {

// Settings that would need absurd memory are refused at start, not at the first batch
// (where a worker thread would die of std::bad_alloc).
std::shared_ptr<const Dataset> within_limits(std::shared_ptr<const Dataset> d) {
  constexpr size_t kMaxSampleBytes = size_t{1} << 30;
  constexpr uint64_t kMaxSamples = uint64_t{1} << 32;
  const DatasetInfo& info = d->info();
  if (info.sample_bytes() > kMaxSampleBytes) {
    std::string shape;
    for (const int64_t s : info.sample_shape) {
      if (!shape.empty()) shape += 'x';
      shape += std::to_string(s);
    }
    throw ConfigError("one sample of dataset '" + info.name + "' would be " + shape + " (" +
                      std::to_string(info.sample_bytes() >> 20) + " MiB; at most 1024 MiB): check --image-size and "
                      "the sizes in --pipeline");
  }
  if (info.size > kMaxSamples) {
    throw ConfigError("dataset '" + info.name + "' has " + std::to_string(info.size) +
                      " samples per epoch, more than tandem indexes (4294967296): lower --dataset-size");
  }
  return d;
}

std::shared_ptr<const Dataset> make_any(const DataOptions& opts) {
  if (opts.data == "synthetic") return make_synthetic(opts);
  if (opts.data == "blur-benchmark") return make_blur_benchmark(opts);
  if (opts.data == "premade") return make_premade(opts);
  const std::string source = split_source(opts.data).first;
  if (source == "imagefolder") return make_image_folder(opts, data_path(opts));
  if (source == "mnist") return make_mnist(opts, data_path(opts));
  if (source == "webdataset") return make_webdataset(opts, data_path(opts));
  if (source == "manifest") return make_manifest(opts, data_path(opts));
  if (source == "python") return make_python_dataset(opts);
  throw ConfigError("unknown --data '" + printable(opts.data, 80) +
                    "': use 'synthetic' (a small learnable task), 'blur-benchmark', 'premade', "
                    "'imagefolder[:PATH]' (one folder per class), 'mnist[:PATH]' (idx files), "
                    "'webdataset[:PATH]' (tar shards), 'manifest:FILE' (paths and labels) or "
                    "'python:FILE:NAME' (your own dataset)");
}

}  // namespace

std::shared_ptr<const Dataset> make_dataset(const DataOptions& opts) { return within_limits(make_any(opts)); }

DType dataset_dtype(const DataOptions& opts) {
  const std::string source = split_source(opts.data).first;
  return source == "imagefolder" || source == "mnist" || source == "python" || source == "webdataset" ||
                 source == "manifest"
             ? DType::kUInt8
             : DType::kFloat32;
}

namespace {

// A description's settings in order: {"", kind} first, then {name, value} ("pipeline" ->
// "decode(...),..."). A value holding a space (a file name) continues to the next name=.
std::vector<std::pair<std::string, std::string>> settings_of(const std::string& description) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= description.size()) {
    size_t end = description.find(' ', start);
    if (end == std::string::npos) end = description.size();
    const std::string token = description.substr(start, end - start);
    const size_t eq = token.find('=');
    if (out.empty()) out.emplace_back("", token);
    else if (eq == std::string::npos || eq == 0) out.back().second += " " + token;
    else out.emplace_back(token.substr(0, eq), token.substr(eq + 1));
    start = end + 1;
  }
  return out;
}

struct SettingWords {
  const char* name;   // as in the description
  const char* label;  // as a person says it
  const char* flag;   // where it is set
};

constexpr SettingWords kSettingWords[] = {
    {"", "dataset", "--data"},
    {"seed", "seed", "--seed"},
    {"size", "samples per epoch", "--dataset-size"},
    {"image", "image size", "--image-size"},
    {"classes", "classes", "--num-classes"},
    {"pipeline", "pipeline", "--pipeline, or --image-size and --split, which choose the default one"},
    {"files", "files whose names and sizes hash to", "--data: give every host the same files"},
    {"n", "image files", "--data: give every host the same files"},
    {"images", "images file", "--data"},
    {"labels", "labels file", "--data"},
    {"code", "Python file whose bytes hash to", "--data python:FILE:NAME: give every worker the same FILE"},
    {"file", "Python file", "--data python:FILE:NAME"},
    {"name", "Python dataset", "--data python:FILE:NAME"},
    {"args", "Python dataset arguments", "--data-args"},
    {"fields", "sample fields", "--data python:FILE:NAME: the fields its __getitem__ returns"},
    {"shards", "shards whose names, sizes and index hash to", "--data: give every host the same shards"},
    {"manifest", "manifest whose bytes hash to", "--data: give every host the same manifest"},
};

// Where the step of `pipeline` that holds position `at` starts (steps are name(args)
// separated by commas at depth 0).
size_t step_start(const std::string& pipeline, size_t at) {
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i < std::min(at, pipeline.size()); ++i) {
    if (pipeline[i] == '(') ++depth;
    if (pipeline[i] == ')') --depth;
    if (pipeline[i] == ',' && depth == 0) start = i + 1;
  }
  return start;
}

// Two pipelines from the first step that differs ("...,random_resized_crop(size=32,...)"):
// their common start says nothing and would push the difference out of a shortened value.
std::pair<std::string, std::string> from_first_difference(const std::string& a, const std::string& b) {
  const auto diff = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  const size_t start = step_start(a, static_cast<size_t>(diff.first - a.begin()));
  if (start == 0) return {a, b};
  return {"...," + a.substr(start), "...," + b.substr(start)};
}

std::string one_difference(const std::string& name, const std::string& theirs, const std::string& ours,
                           std::string_view who) {
  SettingWords words{name.c_str(), name.c_str(), ""};
  for (const SettingWords& w : kSettingWords) {
    if (name == w.name) words = w;
  }
  const auto [a, b] = name == "pipeline" ? from_first_difference(theirs, ours) : std::make_pair(theirs, ours);
  std::string out = std::string(words.label) + " " + printable(a, 120) + ", " + std::string(who) + " expects " +
                    printable(b, 120);
  return *words.flag ? out + " (" + words.flag + ")" : out;
}

using DescribedSettings = std::vector<std::pair<std::string, std::string>>;

// The description's settings that `opts` sets, away from their defaults, without the
// files (the kind first): what a host that learns its dataset from a worker can still
// check; a setting left at its default takes the worker's. Empty for a dataset that is
// made, not read (it is never learnt).
DescribedSettings settings_without_files(const DataOptions& opts) {
  const DataOptions defaults;
  const std::string source = split_source(opts.data).first;
  const bool pipeline_set = !opts.pipeline.empty() || opts.image_size != defaults.image_size ||
                            opts.split != defaults.split;
  DescribedSettings out;
  if (source == "imagefolder") {
    out = {{"", "imagefolder/v1"}};
    if (pipeline_set) out.emplace_back("pipeline", image_folder_pipeline(opts));
    if (opts.max_image_pixels != defaults.max_image_pixels) {
      out.emplace_back("max_pixels", std::to_string(opts.max_image_pixels));
    }
  } else if (source == "mnist") {
    out = {{"", "mnist/v1"}};
    if (!opts.pipeline.empty()) out.emplace_back("pipeline", parse_pipeline(opts.pipeline).canonical());
  } else if (source == "python") {
    const std::string rest = split_source(opts.data).second;
    out = {{"", "python/v1"},
           {"file", std::filesystem::path(python_file_of(opts)).filename().string()},
           {"name", rest.substr(rest.rfind(':') + 1)}};
  } else {
    return {};
  }
  if (opts.seed != defaults.seed) out.emplace_back("seed", std::to_string(opts.seed));
  if (opts.dataset_size > 0) out.emplace_back("size", std::to_string(opts.dataset_size));
  return out;
}

}  // namespace

std::string describe_difference(const std::string& theirs, const DataOptions& ours, std::string_view who) {
  if (theirs.empty()) return "";
  const DescribedSettings mine = settings_without_files(ours);
  if (mine.empty()) return "";
  const auto a = settings_of(theirs);
  if (a.front().second != mine.front().second) return one_difference("", a.front().second, mine.front().second, who);
  std::string out;
  for (const auto& setting : mine) {
    const std::string& name = setting.first;
    const auto worker = std::find_if(a.begin(), a.end(), [&](const auto& s) { return s.first == name; });
    if (name.empty() || worker == a.end() || worker->second == setting.second) continue;
    out += (out.empty() ? "" : "; ") + one_difference(name, worker->second, setting.second, who);
  }
  return out;
}

std::string describe_difference(const std::string& theirs, const std::string& ours, std::string_view who) {
  if (theirs.empty() || ours.empty()) return "";
  const auto a = settings_of(theirs), b = settings_of(ours);
  if (a.front().second != b.front().second) return one_difference("", a.front().second, b.front().second, who);
  std::string out;
  // Named pairs, not structured bindings: clang 14 (the fuzz build) cannot capture those.
  for (const auto& setting : a) {
    const std::string& name = setting.first;
    const auto mine = std::find_if(b.begin(), b.end(), [&](const auto& s) { return s.first == name; });
    const std::string expected = mine == b.end() ? "(none)" : mine->second;
    if (expected != setting.second) out += (out.empty() ? "" : "; ") + one_difference(name, setting.second, expected, who);
  }
  for (const auto& setting : b) {
    const std::string& name = setting.first;
    const bool theirs_too = std::any_of(a.begin(), a.end(), [&](const auto& s) { return s.first == name; });
    if (!theirs_too) out += (out.empty() ? "" : "; ") + one_difference(name, "(none)", setting.second, who);
  }
  return out;
}

uint64_t fnv1a(std::string_view data, uint64_t hash) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string hex64(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string fingerprint_of(const std::string& description) { return hex64(fnv1a(description)); }

}  // namespace tandem::data
