#include "tandem/data/sources/mnist.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"
#include "tandem/data/augment/pipeline.h"
#include "tandem/data/core/rng.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/sources/idx.h"

namespace tandem::data {
namespace fs = std::filesystem;
namespace {

std::string first_existing(const fs::path& dir, const std::string& name) {
  for (const std::string& candidate : {name, name + ".gz"})
    if (fs::exists(dir / candidate)) return (dir / candidate).string();
  throw ConfigError("no " + name + "[.gz] in " + dir.string() +
                    ": an MNIST-format folder holds train-/t10k-images-idx3-ubyte and -labels-idx1-ubyte files");
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

class MnistDataset final : public Dataset {
 public:
  MnistDataset(const ImageOptions& opts, const std::string& images_path, const std::string& labels_path)
      : seed_(opts.seed), shm_bytes_(opts.python.shm_bytes), images_(read_idx(images_path, 3)), labels_(read_idx(labels_path, 1)) {
    if (images_.dims[0] != labels_.dims[0]) {
      throw ConfigError(images_path + " holds " + std::to_string(images_.dims[0]) + " images but " + labels_path +
                        " holds " + std::to_string(labels_.dims[0]) + " labels: use files of the same set");
    }
    rows_ = static_cast<int>(images_.dims[1]);
    cols_ = static_cast<int>(images_.dims[2]);
    const int size = opts.image_size;
    const std::string text = !opts.pipeline.empty() ? opts.pipeline
                             : (size && (size != rows_ || size != cols_)) ? "resize(" + std::to_string(size) + "," + std::to_string(size) + ")"
                                                                          : "";
    spec_ = parse_pipeline(text);
    pipeline_ = std::make_unique<Pipeline>(spec_, PipelineSource{false, 1, rows_, cols_, kDefaultMaxImagePixels, &opts.python});
    pipeline_->learn_output([&](uint8_t* out) { make(0, 0, 0, out); });
    fill_info(opts, images_path, labels_path);
    spdlog::info("mnist {}: {} images of {}x{}, {} classes, {} samples per epoch", images_path, images_.dims[0], rows_,
                 cols_, info_.num_classes, info_.size);
  }

  const DatasetInfo& info() const override { return info_; }
  uint64_t shared_memory_bytes() const override { return pipeline_->has_python_step() ? shm_bytes_ : 0; }
  std::string determinism_problem() const override { return pipeline_->determinism_problem(); }

 private:
  int64_t make_sample(uint64_t index, uint32_t epoch, std::span<std::byte> out, const FieldsOut* extra) const override {
    check_sample_index(index, info_);
    const uint64_t item = item_of(index, info_.size, images_.dims[0]);
    make(index, epoch, item, reinterpret_cast<uint8_t*>(out.data()), extra);
    return labels_.values[item];
  }

  void make(uint64_t index, uint32_t epoch, uint64_t item, uint8_t* out, const FieldsOut* extra = nullptr) const {
    thread_local Image image;
    image.reshape(rows_, cols_, 1);
    std::memcpy(image.pixels.data(), images_.values.data() + item * rows_ * cols_, image.bytes());
    Rng rng(kAugmentStream, seed_, epoch, index);
    pipeline_->run_image(image, rng, out, index, extra);
  }

  void fill_info(const ImageOptions& opts, const std::string& images_path, const std::string& labels_path) {
    info_.name = "mnist";
    info_.size = samples_per_epoch(opts.dataset_size, images_.dims[0], images_path);
    info_.sample_shape = pipeline_->sample_shape();
    info_.dtype = DType::kUInt8;
    info_.add_fields(pipeline_->extra_fields());
    info_.num_classes = std::max<int>(10, *std::max_element(labels_.values.begin(), labels_.values.end()) + 1);
    const bool fashion = lowercase(images_path).find("fashion") != std::string::npos;
    info_.mean.assign(pipeline_->channels(), fashion ? 0.2860f : 0.1307f);
    info_.std.assign(pipeline_->channels(), fashion ? 0.3530f : 0.3081f);
    if (!pipeline_->mean().empty()) {
      info_.mean = pipeline_->mean();
      info_.std = pipeline_->stddev();
    }
    info_.description =
        "mnist/v1 images=" + fs::path(images_path).filename().string() + ":" + std::to_string(images_.file_bytes) +
        " labels=" + fs::path(labels_path).filename().string() + ":" + std::to_string(labels_.file_bytes) +
        " n=" + std::to_string(images_.dims[0]) + " size=" + std::to_string(info_.size) +
        " seed=" + std::to_string(seed_) + " pipeline=" + spec_.canonical();
    info_.fingerprint = fingerprint_of(info_.description);
  }

  uint64_t seed_;
  uint64_t shm_bytes_;  // ImageOptions::python.shm_bytes
  IdxArray images_, labels_;
  int rows_ = 0, cols_ = 0;
  PipelineSpec spec_;
  std::unique_ptr<Pipeline> pipeline_;
  DatasetInfo info_;
};

}  // namespace

std::pair<std::string, std::string> mnist_files(const std::string& path, const std::string& split) {
  if (split != "train" && split != "test") {
    throw ConfigError("unknown --split '" + printable(split, 40) + "': use 'train' or 'test'");
  }
  if (fs::is_directory(path)) {
    const std::string prefix = split == "train" ? "train" : "t10k";
    return {first_existing(path, prefix + "-images-idx3-ubyte"), first_existing(path, prefix + "-labels-idx1-ubyte")};
  }
  const std::string name = fs::path(path).filename().string();
  const size_t at = name.find("images-idx3");
  if (at == std::string::npos) {
    throw ConfigError("--data mnist:" + printable(path, 200) + ": name a folder or an images file (*images-idx3-ubyte[.gz])");
  }
  const fs::path labels = fs::path(path).parent_path() / (name.substr(0, at) + "labels-idx1" + name.substr(at + 11));
  if (!fs::exists(labels)) throw ConfigError("no labels file " + labels.string() + " next to " + path);
  return {path, labels.string()};
}

std::shared_ptr<const Dataset> make_mnist(const ImageOptions& opts, const std::string& path) {
  const auto [images, labels] = mnist_files(path, opts.split);
  return std::make_shared<MnistDataset>(opts, images, labels);
}

}  // namespace tandem::data
