#include "tandem/data/sources/python_dataset.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <filesystem>
#include <mutex>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/core/rng.h"
#include "tandem/data/sources/bad_samples.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/sources/python_images.h"
#include "tandem/data/sources/torchvision_folder.h"

namespace tandem::data {
namespace fs = std::filesystem;
namespace {

std::string read_source(const std::string& path) {
  std::optional<std::string> text = read_file(path);
  if (!text) throw ConfigError("cannot read " + path + " (--data python:FILE:NAME): check the path and its permissions");
  return std::move(*text);
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

PythonPoolOptions python_pool_options(const PythonDatasetOptions& opts) {
  auto [file, name] = file_and_name(opts.data);
  const std::string args = canonical_args(opts.data_args);
  PythonPoolOptions p = python_runtime_options(opts.python);
  p.file = std::move(file);
  p.name = std::move(name);
  p.args_json = args;
  return p;
}

namespace {

class PythonDataset final : public Dataset {
 public:
  // `images`: a dataset whose 'image' is a tandem.Image, decoded and augmented here.
  PythonDataset(const PythonDatasetOptions& opts, std::unique_ptr<PythonProcessPool> pool,
                std::unique_ptr<EncodedImages> images = nullptr)
      : seed_(opts.seed), shm_bytes_(opts.python.shm_bytes), policy_(parse_bad_sample_policy(opts.on_bad_sample)),
        pool_(std::move(pool)), images_(std::move(images)) {
    const PythonPoolOptions& p = pool_->options();
    source_ = "python:" + p.file + ":" + p.name;
    info_.name = "python";
    info_.size = samples_per_epoch(opts.dataset_size, pool_->about().len, source_);
    info_.dtype = DType::kUInt8;
    learn_schema(opts);
    if (images_) std::tie(info_.mean, info_.std) = std::pair{images_->pipeline().mean(), images_->pipeline().stddev()};
    info_.description = "python/v1 code=" + hex64(fnv1a(read_source(p.file))) + " file=" +
                        fs::path(p.file).filename().string() + " name=" + p.name + " size=" + std::to_string(info_.size) +
                        " classes=" + std::to_string(info_.num_classes) + " seed=" + std::to_string(seed_) +
                        " fields=" + fields_text() + " args=" + p.args_json +
                        (images_ ? " native=tandem-images/v1 output=" + images_->output() + " pipeline=" +
                                       images_->canonical()
                                 : "");
    info_.fingerprint = fingerprint_of(info_.description);
    spdlog::info("{}: {} samples of {} in {} classes, {} Python processes ({})", source_, info_.size, fields_text(),
                 info_.num_classes, p.procs, p.python);
  }

  const DatasetInfo& info() const override { return info_; }
  std::vector<std::string> skipped() const override { return skips_.entries(); }
  uint64_t skipped_count() const override { return skips_.count(); }
  uint64_t shared_memory_bytes() const override { return shm_bytes_; }

  std::string determinism_problem() const override {
    std::call_once(determinism_once_, [this] { determinism_ = check_determinism(); });
    return determinism_;
  }

 private:
  // Samples 0, the middle one and the last, each made twice in one process and once in
  // another: any difference is a random source tandem does not seed.
  std::string check_determinism() const {
    const uint64_t len = pool_->about().len;
    if (len == 0) return "";
    std::vector<PythonProcessPool::Probe> samples;
    for (const uint64_t item : {uint64_t{0}, len / 2, len - 1}) {
      if (samples.empty() || samples.back().index != item) samples.push_back({item, python_sample_seed(seed_, 0, item)});
    }
    const std::vector<uint64_t> differ = pool_->unrepeatable(samples);
    if (differ.empty()) return "";
    std::string which;
    for (const uint64_t i : differ) which += (which.empty() ? "" : ", ") + std::to_string(i);
    return source_ + " is not deterministic: sample" + (differ.size() > 1 ? "s " : " ") + which +
           " came out different when made twice with the same seed (in one process, and in two), so resuming, "
           "a rejoining worker and a re-sent request cannot give the same bytes. It draws from a source tandem "
           "does not seed (os.urandom, secrets, the time, the process id, state that changes between calls): "
           "draw from tandem.sample_rng(), random or numpy.random, which tandem seeds per sample, and keep "
           "__getitem__ free of state (docs/datasets.md, 'Seeding')";
  }

  int64_t make_sample(uint64_t index, uint32_t epoch, std::span<std::byte> out, const FieldsOut* extra) const override {
    check_sample_index(index, info_);
    const uint64_t seed = python_sample_seed(seed_, epoch, index);
    const uint64_t len = pool_->about().len;
    uint64_t item = item_of(index, info_.size, len);
    for (uint64_t tries = 0;; ++tries) {
      std::string problem;
      try {
        return make(item, seed, out, extra, {epoch, index});
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

  // One request to one process for them all; a sample it could not make there (it raised,
  // broke the schema, its process died) is made alone, as make_sample() makes it, which
  // substitutes it (--on-bad-sample skip) or says why it failed.
  std::vector<int64_t> make_samples(std::span<const uint64_t> indices, uint32_t epoch,
                                    const std::function<SampleOut(size_t)>& out, SampleReads* reads,
                                    size_t first) const override {
    if (indices.size() < 2) return Dataset::make_samples(indices, epoch, out, reads, first);
    std::vector<std::pair<uint64_t, uint64_t>> items;
    for (const uint64_t index : indices) {
      check_sample_index(index, info_);
      items.emplace_back(item_of(index, info_.size, pool_->about().len), python_sample_seed(seed_, epoch, index));
    }
    std::vector<int64_t> labels(indices.size());
    std::vector<bool> made(indices.size(), false);
    pool_->run_many(items, [&](size_t i, const SampleFields* fields, const std::string&) {
      if (!fields) return;
      const SampleOut to = out(i);
      made[i] = write_checked(*fields, to.image, to.fields, labels[i], {epoch, indices[i]}).empty();
    });
    for (size_t i = 0; i < indices.size(); ++i) {
      if (made[i]) continue;
      const SampleOut to = out(i);
      labels[i] = make_sample(indices[i], epoch, to.image, to.fields);
    }
    return labels;
  }

  std::string describe(uint64_t item) const { return "sample " + std::to_string(item) + " of " + source_; }

  // "image:uint8[3,8,8],label:int64[],boxes:float32[-1,4]": the schema in the description.
  std::string fields_text() const {
    std::string out;
    for (const FieldSpec& f : info_.fields) {
      if (!out.empty()) out += ',';
      out += printable(f.name, 60) + ":" + dtype_name(f.dtype) + shape_text(f.shape);
    }
    return out;
  }

  // Writes dataset[item]: its image into `out`, its other fields into `extra` (when not
  // null); returns its label (0 without one). Throws PythonSampleError, having written
  // nothing, for a sample that breaks the schema.
  // Which sample of which epoch: a tandem.Image's augmentation is keyed by it.
  struct Key {
    uint32_t epoch = 0;
    uint64_t index = 0;
  };

  int64_t make(uint64_t item, uint64_t seed, std::span<std::byte> out, const FieldsOut* extra, Key key) const {
    int64_t label = 0;
    std::string problem;
    pool_->run(item, seed, [&](const SampleFields& fields) { problem = write_checked(fields, out, extra, label, key); });
    if (!problem.empty()) throw PythonSampleError(describe(item) + ": " + problem);
    return label;
  }

  // Writes a sample's fields (as make() says) and sets `label`; or, having written
  // nothing, returns how they break the schema.
  std::string write_checked(const SampleFields& given, std::span<std::byte> out, const FieldsOut* extra,
                            int64_t& label, Key key) const {
    const SampleFields* decoded = &given;
    try {
      if (images_) decoded = &images_->decoded(given, seed_, key.epoch, key.index);
    } catch (const DataError& e) {
      return e.what();
    }
    const SampleFields& fields = *decoded;
    std::string problem = python_sample_problem(fields, info_.fields);
    if (!problem.empty()) return problem;
    label = 0;
    for (const auto& [name, f] : fields) {
      if (name == kLabelField) label = f.integer;
    }
    if (info_.has_label() && (label < 0 || label >= info_.num_classes)) return label_problem(label);
    write(fields, out, extra);
    return "";
  }

  void write(const SampleFields& fields, std::span<std::byte> out, const FieldsOut* extra) const {
    write_python_fields(fields, info_.fields, out, extra);
  }

  std::string label_problem(int64_t label) const {
    return "label " + std::to_string(label) + " is outside the dataset's " + std::to_string(info_.num_classes) +
           " classes [0, " + std::to_string(info_.num_classes) + "): give the dataset a num_classes attribute or a " +
           "classes list, or pass --num-classes";
  }

  // The schema from sample 0 (python_schema) and, with a 'label', the classes from the
  // dataset (num_classes, or len(classes)), else --num-classes.
  void learn_schema(const PythonDatasetOptions& opts) {
    int64_t label = 0;
    try {
      pool_->run(0, python_sample_seed(seed_, 0, 0), [&](const SampleFields& given) {
        if (images_) images_->learn(given, seed_);
        const SampleFields& fields = images_ ? images_->decoded(given, seed_, 0, 0) : given;
        info_.fields = python_schema(fields, pool_->about().ragged_fields);
        for (const auto& [name, f] : fields) {
          if (name == kLabelField) label = f.integer;
        }
      });
    } catch (const PythonSampleError& e) {
      throw ConfigError("cannot use " + source_ + ": " + e.what());
    } catch (const ConfigError& e) {
      throw ConfigError("cannot use sample 0 of " + source_ + ": " + e.what());
    }
    for (const FieldSpec& f : info_.fields) {  // uint8, or float32 (ToTensor's, normalised by the dataset)
      if (f.name == kImageField) std::tie(info_.sample_shape, info_.dtype) = std::tie(f.shape, f.dtype);
    }
    if (info_.has_label()) learn_classes(opts, label);
  }

  void learn_classes(const PythonDatasetOptions& opts, int64_t label) {
    const PythonDatasetAbout& about = pool_->about();
    info_.num_classes = static_cast<int>(about.num_classes.value_or(about.classes ? about.classes->size() : opts.num_classes));
    if (about.classes && about.classes->size() == static_cast<size_t>(info_.num_classes)) info_.class_names = *about.classes;
    if (info_.num_classes < 1) {
      throw ConfigError(source_ + " has " + std::to_string(info_.num_classes) +
                        " classes: give the dataset a num_classes attribute or a classes list, or pass --num-classes");
    }
    if (label < 0 || label >= info_.num_classes) {
      throw ConfigError("cannot use sample 0 of " + source_ + ": " + label_problem(label));
    }
  }

  uint64_t seed_;
  uint64_t shm_bytes_;
  BadSamplePolicy policy_;
  std::unique_ptr<PythonProcessPool> pool_;
  std::unique_ptr<EncodedImages> images_;  // null unless 'image' is a tandem.Image
  mutable std::once_flag determinism_once_;
  mutable std::string determinism_;  // check_determinism(), once
  std::string source_;
  DatasetInfo info_;
  mutable SkipLog skips_;
};

}  // namespace

std::shared_ptr<const Dataset> make_python_dataset(const PythonDatasetOptions& opts, const ImageOptions& images) {
  PythonPoolOptions p = python_pool_options(opts);
  p.describe_native = opts.native;
  // One process answers whether tandem makes it natively; the others start when it is not.
  const bool all_at_once = p.start_procs == 0;
  if (p.describe_native && all_at_once) p.start_procs = 1;
  auto pool = std::make_unique<PythonProcessPool>(p);
  const std::string source = "python:" + p.file + ":" + p.name;
  const std::string native = pool->about().native_json;
  if (native.find("\"per_sample\":true") != std::string::npos) {
    auto encoded = std::make_unique<EncodedImages>(native, images, "python:" + p.file + ":" + p.name);
    return std::make_shared<PythonDataset>(opts, std::move(pool), std::move(encoded));
  }
  if (!native.empty()) {
    return make_torchvision_folder(images, pool->about().native_json, source,
                                   "python/v1 code=" + hex64(fnv1a(read_source(p.file))) + " file=" +
                                       fs::path(p.file).filename().string() + " name=" + p.name + " args=" +
                                       p.args_json);
  }
  // A torchvision folder (or tandem.Image files) tandem would have to approximate: its own
  // Python code makes it, said.
  const std::string why = pool->about().native_reason;  // a copy: the pool moves into the dataset
  const bool folder = !why.empty() && why.find("is not a torchvision") == std::string::npos;
  if (folder) spdlog::warn("{} is made by its own Python code: not made natively: {}", source, why);
  try {
    if (all_at_once) pool->start_rest();
    return std::make_shared<PythonDataset>(opts, std::move(pool));
  } catch (const ConfigError& e) {
    if (!folder) throw;
    throw ConfigError(std::string(e.what()) + " (not made natively: " + why + ")");
  }
}

}  // namespace tandem::data
