#include "tandem/data/sources/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/sources/image_folder.h"
#include "tandem/data/sources/mnist.h"
#include "tandem/data/sources/python_dataset.h"
#include "tandem/data/sources/synthetic.h"

namespace tandem::data {

std::string batch_problem(const Batch& batch, const DatasetInfo& info) {
  const auto& s = info.sample_shape;
  const std::string which = "batch " + std::to_string(batch.sequence);
  if (batch.shape.size() != s.size() + 1 || !std::equal(s.begin(), s.end(), batch.shape.begin() + 1)) {
    return which + " has the wrong sample shape for dataset '" + info.name + "'";
  }
  const auto n = static_cast<size_t>(batch.size());
  if (batch.labels.size() != n) {
    return which + " has " + std::to_string(batch.labels.size()) + " labels for " + std::to_string(n) + " samples";
  }
  const size_t bytes = n * (info.sample_bytes() / dtype_size(info.dtype)) * dtype_size(batch.dtype);
  if (batch.data.size() != bytes) {
    return which + " has " + std::to_string(batch.data.size()) + " bytes for " + std::to_string(n) + " " +
           dtype_name(batch.dtype) + " samples (expected " + std::to_string(bytes) + ")";
  }
  for (const int64_t label : batch.labels) {
    if (label < 0 || label >= info.num_classes) {
      return which + " has label " + std::to_string(label) + ", outside the dataset's " +
             std::to_string(info.num_classes) + " classes";
    }
  }
  return {};
}


std::string info_problem(const DatasetInfo& info) {
  constexpr int64_t kMaxSide = 1 << 16;
  constexpr int kMaxClasses = 1 << 24;
  if (info.name.empty() || info.name.size() > 200) return "no usable dataset name";
  if (info.fingerprint.empty()) return "no fingerprint";
  if (info.size == 0 || info.size > (uint64_t{1} << 32)) return "size " + std::to_string(info.size) + " samples";
  if (info.sample_shape.size() != 3) return "a sample shape of " + std::to_string(info.sample_shape.size()) + " dimensions, not [C, H, W]";
  for (int64_t d : info.sample_shape) {
    if (d < 1 || d > kMaxSide) return "a sample dimension of " + std::to_string(d);
  }
  if (info.sample_shape[0] > 64) return std::to_string(info.sample_shape[0]) + " channels";
  if (info.num_classes < 1 || info.num_classes > kMaxClasses) {
    return "a class count of " + std::to_string(info.num_classes) + " (a worker of an older tandem does not say it)";
  }
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

size_t DatasetInfo::sample_bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : sample_shape) n *= static_cast<size_t>(d);
  return n;
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
  if (source == "python") return make_python_dataset(opts);
  throw ConfigError("unknown --data '" + printable(opts.data, 80) +
                    "': use 'synthetic' (a small learnable task), 'blur-benchmark', 'premade', "
                    "'imagefolder[:PATH]' (one folder per class), 'mnist[:PATH]' (idx files) or "
                    "'python:FILE:NAME' (your own dataset)");
}

}  // namespace

std::shared_ptr<const Dataset> make_dataset(const DataOptions& opts) { return within_limits(make_any(opts)); }

DType dataset_dtype(const DataOptions& opts) {
  const std::string source = split_source(opts.data).first;
  return source == "imagefolder" || source == "mnist" || source == "python" ? DType::kUInt8 : DType::kFloat32;
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
};

std::string one_difference(const std::string& name, const std::string& theirs, const std::string& ours) {
  SettingWords words{name.c_str(), name.c_str(), ""};
  for (const SettingWords& w : kSettingWords) {
    if (name == w.name) words = w;
  }
  std::string out = std::string(words.label) + " " + printable(theirs, 120) + ", this trainer expects " +
                    printable(ours, 120);
  return *words.flag ? out + " (" + words.flag + ")" : out;
}

}  // namespace

std::string describe_difference(const std::string& theirs, const std::string& ours) {
  if (theirs.empty() || ours.empty()) return "";
  const auto a = settings_of(theirs), b = settings_of(ours);
  if (a.front().second != b.front().second) return one_difference("", a.front().second, b.front().second);
  std::string out;
  // Named pairs, not structured bindings: clang 14 (the fuzz build) cannot capture those.
  for (const auto& setting : a) {
    const std::string& name = setting.first;
    const auto mine = std::find_if(b.begin(), b.end(), [&](const auto& s) { return s.first == name; });
    const std::string expected = mine == b.end() ? "(none)" : mine->second;
    if (expected != setting.second) out += (out.empty() ? "" : "; ") + one_difference(name, setting.second, expected);
  }
  for (const auto& setting : b) {
    const std::string& name = setting.first;
    const bool theirs_too = std::any_of(a.begin(), a.end(), [&](const auto& s) { return s.first == name; });
    if (!theirs_too) out += (out.empty() ? "" : "; ") + one_difference(name, "(none)", setting.second);
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

std::string fingerprint_of(const std::string& description) {
  const uint64_t h = fnv1a(description);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace tandem::data
