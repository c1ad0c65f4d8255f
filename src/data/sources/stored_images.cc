#include "tandem/data/sources/stored_images.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/hash.h"
#include "tandem/data/augment/pipeline.h"
#include "tandem/data/codecs/pixel_limit.h"
#include "tandem/data/core/rng.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/data/sources/bad_samples.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/sources/tar.h"

namespace tandem::data {
namespace {

// What a member read says when the bytes before it are not its tar header.
std::string stale_shard(const StoredItem& item) {
  return "the shard is not as it was indexed (no tar header of this " + std::to_string(item.bytes) +
         "-byte member at byte " + std::to_string(item.offset) + "): run `tandem index` on the shards again, or " +
         "delete their tandem-index.txt";
}

}  // namespace

namespace {

// A listed file's path: absolute as listed, else under the root.
std::string path_of(const StoredIndex& index, const StoredItem& item) {
  const std::string& file = index.files[item.file];
  return !file.empty() && file[0] == '/' ? file : index.root + "/" + file;
}

}  // namespace

ReadPlan plan_item(const StoredIndex& index, const StoredItem& item) {
  ReadPlan plan;
  plan.path = path_of(index, item);
  plan.bytes = item.bytes;
  if (!index.members) {
    plan.whole = true;  // checked against the size it had when listed
    return plan;
  }
  // The member's tar header comes in the same read: a shard rewritten since it was indexed
  // (same size, members moved) is named, not taken for a corrupt image or a wrong label.
  plan.member = true;
  plan.offset = item.offset;
  plan.header = static_cast<uint32_t>(kTarHeaderBytes);
  if (item.offset < kTarHeaderBytes) plan.problem = stale_shard(item);
  return plan;
}

void check_item(const StoredItem& item, Fetched& fetched) {
  if (!fetched.problem.empty() || fetched.header.size() != kTarHeaderBytes) return;
  if (!is_member_header(reinterpret_cast<const char*>(fetched.header.data()), item.bytes)) {
    fetched.problem = stale_shard(item);
    fetched.bytes.clear();
  }
}

std::string read_item(const StoredIndex& index, const StoredItem& item, std::vector<uint8_t>& out) {
  Fetched fetched = read_blocking(plan_item(index, item));
  check_item(item, fetched);
  out = std::move(fetched.bytes);
  return fetched.problem;
}

std::string item_name(const StoredIndex& index, const StoredItem& item) {
  const std::string path = path_of(index, item);
  return index.members ? path + ": member " + item.member : path;
}

std::string default_image_pipeline(const ImageOptions& opts) {
  const int s = opts.image_size ? opts.image_size : 224;
  if (opts.split == "test") {
    const int resize = static_cast<int>(std::lround(s * 256.0 / 224.0));
    return "decode,resize(" + std::to_string(resize) + "),center_crop(" + std::to_string(s) + ")";
  }
  return "decode,random_resized_crop(" + std::to_string(s) + "),hflip";
}

namespace {

constexpr uint64_t kDefaultReadAheadBytes = uint64_t{256} << 20;

class StoredImageDataset final : public Dataset {
 public:
  StoredImageDataset(const ImageOptions& opts, StoredIndex index)
      : seed_(opts.seed),
        max_pixels_(opts.max_image_pixels),
        shm_bytes_(opts.python.shm_bytes),
        latency_(std::chrono::duration<double, std::milli>(opts.emulate_read_latency_ms)),
        policy_(parse_bad_sample_policy(opts.on_bad_sample)),
        index_(std::move(index)),
        spec_(parse_pipeline(opts.pipeline.empty() ? default_image_pipeline(opts) : opts.pipeline)),
        pipeline_(spec_, {true, 3, 0, 0, opts.max_image_pixels, &opts.python}) {
    for (const auto& [path, problem] : index_.skipped) skips_.note(path, problem);
    info_.name = index_.name;
    info_.size = samples_per_epoch(opts.dataset_size, index_.items.size(), index_.root);
    learn_python_output();
    info_.sample_shape = pipeline_.sample_shape();
    info_.dtype = DType::kUInt8;
    info_.add_fields(pipeline_.extra_fields());  // a python() step's dict fields
    info_.num_classes = index_.num_classes;
    info_.class_names = index_.class_names;
    set_normalisation();
    info_.description = index_.description + " size=" + std::to_string(info_.size) + " seed=" +
                        std::to_string(seed_) + " pipeline=" + spec_.canonical() +
                        " max_pixels=" + std::to_string(max_pixels_);
    info_.fingerprint = fingerprint_of(info_.description);
    if (opts.io_threads != 0) {
      const ReadAheadOptions ahead{opts.io_threads, opts.read_ahead_bytes ? opts.read_ahead_bytes : kDefaultReadAheadBytes,
                                   parse_io_engine(opts.io_engine), opts.emulate_read_latency_ms / 1000};
      ReadSource source{[this](uint64_t item) { return plan_item(index_, index_.items[item]); },
                        [this](uint64_t item, Fetched& f) { check_item(index_.items[item], f); }};
      reads_ = std::make_unique<ReadAhead>(ahead, std::move(source));
    }
  }

  const DatasetInfo& info() const override { return info_; }
  std::vector<std::string> skipped() const override { return skips_.entries(); }
  uint64_t skipped_count() const override { return skips_.count(); }
  uint64_t shared_memory_bytes() const override { return pipeline_.has_python_step() ? shm_bytes_ : 0; }
  std::string determinism_problem() const override { return pipeline_.determinism_problem(); }
  const ReadAhead* reader() const override { return reads_.get(); }

  std::unique_ptr<SampleReads> read_ahead(const std::vector<uint64_t>& indices) const override {
    if (!reads_) return nullptr;
    std::vector<uint64_t> items;
    items.reserve(indices.size());
    for (const uint64_t i : indices) items.push_back(i < info_.size ? item_of(i, info_.size, index_.items.size()) : 0);
    return reads_->start(items);
  }

  std::vector<int64_t> make_samples(std::span<const uint64_t> indices, uint32_t epoch,
                                    const std::function<SampleOut(size_t)>& out, SampleReads* reads,
                                    size_t first) const override {
    std::vector<int64_t> labels(indices.size());
    for (size_t k = 0; k < indices.size(); ++k) {
      const SampleOut to = out(k);
      labels[k] = produce_from(indices[k], epoch, to.image, to.fields,
                               reads ? reads->take(first + k) : std::optional<Fetched>());
    }
    return labels;
  }

 private:
  int64_t make_sample(uint64_t index, uint32_t epoch, std::span<std::byte> out, const FieldsOut* extra) const override {
    return produce_from(index, epoch, out, extra, std::nullopt);
  }

  // One read of item `item`, after the emulated latency (--emulate-read-latency-ms).
  Fetched fetch(uint64_t item) const {
    if (latency_.count() > 0) std::this_thread::sleep_for(latency_);
    Fetched f;
    f.problem = read_item(index_, index_.items[item], f.bytes);
    return f;
  }

  // Sample `index` (and its extra fields, where `extra`) from its item, or (--on-bad-sample
  // skip) the next good one; `fetched`: the first item's bytes, when the read-ahead has them.
  int64_t produce_from(uint64_t index, uint32_t epoch, std::span<std::byte> out, const FieldsOut* extra,
                       std::optional<Fetched> fetched) const {
    check_sample_index(index, info_);
    const size_t n = index_.items.size();
    uint64_t item = item_of(index, info_.size, n);
    for (uint64_t tries = 0;; ++tries) {
      Fetched bytes = tries == 0 && fetched ? std::move(*fetched) : fetch(item);
      const std::string problem = try_produce(item, bytes, index, epoch, out, extra);
      if (problem.empty()) return index_.items[item].label;
      const std::string name = item_name(index_, index_.items[item]);
      if (policy_ == BadSamplePolicy::kFail) {
        throw DataError(name + ": " + problem + ": " + (index_.members ? "rewrite the shard without it" : "remove or replace the file") +
                        ", or pass --on-bad-sample skip");
      }
      skips_.record(name, problem);
      if (tries + 1 >= std::min<uint64_t>(kMaxSubstituteTries, n)) {
        throw DataError("no usable image among the " + std::to_string(tries + 1) + " files from " + name +
                        " on: check the data under " + index_.root);
      }
      item = (item + 1) % n;  // the substitute: the next item, same random key
    }
  }

  // Makes the sample from `bytes` of item `item`; returns "" or what was wrong with them.
  std::string try_produce(uint64_t item, const Fetched& bytes, uint64_t index, uint32_t epoch,
                          std::span<std::byte> out, const FieldsOut* extra) const {
    if (bytes.host_fault) {  // not the file's fault: this request fails, and is made again
      throw Overloaded("this data worker ran out reading " + item_name(index_, index_.items[item]) + " (" + bytes.problem +
                       "): raise its open-files limit (ulimit -n), or lower --max-streams or --io-threads");
    }
    if (!bytes.problem.empty()) return bytes.problem;
    Rng rng(kAugmentStream, seed_, epoch, index);
    try {
      pipeline_.run_file(bytes.bytes, rng, reinterpret_cast<uint8_t*>(out.data()), index, extra);
    } catch (const ImageTooLarge& e) {
      return e.what();
    } catch (const DecodeError& e) {
      return std::string("not a decodable image: ") + e.what();
    } catch (const PythonSampleError& e) {  // the python() step: the user's code, not the file
      if (policy_ == BadSamplePolicy::kFail) {
        throw DataError(std::string(e.what()) + " (image " + item_name(index_, index_.items[item]) +
                        ")\n(fix the function, or pass --on-bad-sample skip to use the next image instead)");
      }
      return e.what();
    }
    return "";
  }

  // A python() step's output shape: what it returns for sample 0 of epoch 0.
  void learn_python_output() {
    pipeline_.learn_output([&](uint8_t* out) {
      const StoredItem& item = index_.items[item_of(0, info_.size, index_.items.size())];
      std::vector<uint8_t> bytes;
      const std::string problem = read_item(index_, item, bytes);
      if (!problem.empty()) throw DataError(item_name(index_, item) + ": " + problem);
      Rng rng(kAugmentStream, seed_, 0, 0);
      pipeline_.run_file(bytes, rng, out, 0);
    });
  }

  void set_normalisation() {
    if (!pipeline_.mean().empty()) {
      info_.mean = pipeline_.mean();
      info_.std = pipeline_.stddev();
    } else if (pipeline_.channels() == 3) {
      info_.mean = {0.485f, 0.456f, 0.406f};  // ImageNet's
      info_.std = {0.229f, 0.224f, 0.225f};
    } else {
      info_.mean = {0.449f};  // ImageNet's, averaged over channels
      info_.std = {0.226f};
    }
  }

  uint64_t seed_;
  uint64_t max_pixels_;  // under skip, which files are substituted
  uint64_t shm_bytes_;   // ImageOptions::python.shm_bytes
  std::chrono::duration<double, std::milli> latency_;
  BadSamplePolicy policy_;
  StoredIndex index_;
  PipelineSpec spec_;
  Pipeline pipeline_;
  DatasetInfo info_;
  mutable SkipLog skips_;
  std::unique_ptr<ReadAhead> reads_;  // last: its I/O threads read the members above
};

}  // namespace

std::shared_ptr<const Dataset> make_stored_images(const ImageOptions& opts, StoredIndex index) {
  return std::make_shared<StoredImageDataset>(opts, std::move(index));
}

}  // namespace tandem::data
