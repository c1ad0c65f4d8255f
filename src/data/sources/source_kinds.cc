#include "tandem/data/sources/source_kinds.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/hash.h"
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

// The seed and --dataset-size, when set, after a kind's own fixed settings.
DescribedSettings with_common(DescribedSettings out, const DataOptions& opts) {
  const DataOptions defaults;
  if (opts.seed != defaults.seed) out.emplace_back("seed", std::to_string(opts.seed));
  if (opts.dataset_size > 0) out.emplace_back("size", std::to_string(opts.dataset_size));
  return out;
}

DescribedSettings image_folder_fixed(const DataOptions& opts) {
  const DataOptions defaults;
  DescribedSettings out = {{"", "imagefolder/v1"}};
  if (!opts.pipeline.empty() || opts.image_size != defaults.image_size || opts.split != defaults.split) {
    out.emplace_back("pipeline", image_folder_pipeline(image_options(opts)));
  }
  if (opts.max_image_pixels != defaults.max_image_pixels) {
    out.emplace_back("max_pixels", std::to_string(opts.max_image_pixels));
  }
  return with_common(std::move(out), opts);
}

DescribedSettings mnist_fixed(const DataOptions& opts) {
  DescribedSettings out = {{"", "mnist/v1"}};
  if (!opts.pipeline.empty()) out.emplace_back("pipeline", parse_pipeline(opts.pipeline).canonical());
  return with_common(std::move(out), opts);
}

// A Python dataset's identity: its file (and the file's bytes when this host has it), its
// NAME and its arguments (--data-args, when given), as the workers' description says them.
DescribedSettings python_fixed(const DataOptions& opts) {
  const std::string rest = split_source(opts.data).second;
  const std::string file = python_file_of(opts);
  DescribedSettings out = {{"", "python/v1"}};
  if (const std::optional<std::string> code = read_file(file)) out.emplace_back("code", hex64(fnv1a(*code)));
  out.emplace_back("file", std::filesystem::path(file).filename().string());
  out.emplace_back("name", rest.substr(rest.rfind(':') + 1));
  if (!opts.data_args.empty() && opts.data_args != DataOptions{}.data_args) {  // else the workers' stand
    const nlohmann::json args = nlohmann::json::parse(opts.data_args, nullptr, false);
    out.emplace_back("args", args.is_discarded() ? opts.data_args : args.dump());
  }
  return with_common(std::move(out), opts);
}

// The made kinds take their options only; the read kinds the path too.
template <std::shared_ptr<const Dataset> (*F)(const GeneratedOptions&)>
std::shared_ptr<const Dataset> generated(const DataOptions& opts, const DataRole&, const std::string&) {
  return F(generated_options(opts));
}

template <std::shared_ptr<const Dataset> (*F)(const ImageOptions&, const std::string&)>
std::shared_ptr<const Dataset> read(const DataOptions& opts, const DataRole& role, const std::string& path) {
  return F(image_options(opts, role), path);
}

std::shared_ptr<const Dataset> python_made(const DataOptions& opts, const DataRole& role, const std::string&) {
  return make_python_dataset(python_dataset_options(opts, role), image_options(opts, role));
}

const std::vector<SourceKind> kKinds = {
    {"synthetic", "'synthetic' (a small learnable task)", SourceNeeds::kNothing, DType::kFloat32,
     generated<make_synthetic>},
    {"blur-benchmark", "'blur-benchmark'", SourceNeeds::kNothing, DType::kFloat32, generated<make_blur_benchmark>},
    {"premade", "'premade'", SourceNeeds::kNothing, DType::kFloat32, generated<make_premade>},
    {"imagefolder", "'imagefolder[:PATH]' (one folder per class)", SourceNeeds::kFiles, DType::kUInt8,
     read<make_image_folder>, image_folder_fixed},
    {"mnist", "'mnist[:PATH]' (idx files)", SourceNeeds::kFiles, DType::kUInt8, read<make_mnist>, mnist_fixed},
    {"webdataset", "'webdataset[:PATH]' (tar shards)", SourceNeeds::kFiles, DType::kUInt8, read<make_webdataset>,
     nullptr, true, index_webdataset},
    {"manifest", "'manifest:FILE' (paths and labels)", SourceNeeds::kFiles, DType::kUInt8, read<make_manifest>},
    {"python", "'python:FILE:NAME' (your own dataset)", SourceNeeds::kPythonFile, DType::kUInt8, python_made,
     python_fixed},
};

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

}  // namespace

const std::vector<SourceKind>& source_kinds() { return kKinds; }

PythonRuntime python_runtime(const DataOptions& opts, const DataRole& role) {
  return {opts.python, opts.python_procs, opts.sample_timeout_s, role.python_shm_bytes, role.python_start_procs};
}

GeneratedOptions generated_options(const DataOptions& opts) {
  return {opts.seed, opts.num_classes, opts.image_size, opts.dataset_size};
}

ImageOptions image_options(const DataOptions& opts, const DataRole& role) {
  ImageOptions o;
  o.seed = opts.seed;
  o.dataset_size = opts.dataset_size;
  o.image_size = opts.image_size;
  o.split = opts.split;
  o.pipeline = opts.pipeline;
  o.max_image_pixels = opts.max_image_pixels;
  o.on_bad_sample = opts.on_bad_sample;
  o.io_threads = opts.io_threads;
  o.io_engine = opts.io_engine;
  o.read_ahead_bytes = role.read_ahead_bytes;
  o.emulate_read_latency_ms = opts.emulate_read_latency_ms;
  o.python = python_runtime(opts, role);
  return o;
}

PythonDatasetOptions python_dataset_options(const DataOptions& opts, const DataRole& role) {
  return {opts.data, opts.data_args, opts.seed, opts.dataset_size, opts.num_classes, opts.on_bad_sample,
          python_runtime(opts, role), opts.python_native != "off"};
}

std::string source_kinds_usage() {
  std::string out;
  for (const SourceKind& k : kKinds) {
    if (!out.empty()) out += &k == &kKinds.back() ? " or " : ", ";
    out += k.usage;
  }
  return out;
}

const SourceKind& source_kind(const std::string& data) {
  const auto [name, rest] = split_source(data);
  std::vector<std::string> names;
  for (const SourceKind& k : kKinds) {
    if (k.name != name) {
      names.emplace_back(k.name);
      continue;
    }
    if (k.needs == SourceNeeds::kNothing && data.find(':') != std::string::npos) {
      throw ConfigError("--data " + printable(data, 80) + ": '" + std::string(k.name) +
                        "' is made, not read, so it takes no path: write --data " + std::string(k.name));
    }
    return k;
  }
  const std::string near = nearest(name, names, 3);
  throw ConfigError("unknown --data '" + printable(data, 80) + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)") +
                    ": use " + source_kinds_usage());
}

std::shared_ptr<const Dataset> make_dataset(const DataOptions& opts, const DataRole& role) {
  const SourceKind& kind = source_kind(opts.data);
  return within_limits(kind.make(opts, role, kind.needs == SourceNeeds::kFiles ? data_path(opts) : std::string()));
}

DType dataset_dtype(const DataOptions& opts) { return source_kind(opts.data).dtype; }

}  // namespace tandem::data
