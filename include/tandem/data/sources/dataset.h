// A dataset is a source plus its augmentation pipeline: index + epoch -> finished sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/batching/batch.h"
#include "tandem/data/sources/read_ahead.h"

namespace tandem::data {

// The names of the two fields the classification trainer reads: Batch's payload and labels.
inline constexpr const char* kImageField = "image";
inline constexpr const char* kLabelField = "label";

struct DatasetInfo {
  std::string name;                  // e.g. "synthetic"
  uint64_t size = 0;                 // samples per epoch
  std::vector<int64_t> sample_shape;  // [C, H, W] of the "image" field; empty without one
  DType dtype = DType::kFloat32;
  int num_classes = 0;               // 0 without a "label" field
  // The sample's named fields, where the dataset sets them (python:FILE:NAME, and any
  // dataset learned from a worker); empty: the image and the label above. Use schema().
  std::vector<FieldSpec> fields;
  // Hash of everything that determines sample values; trainer and workers compare it.
  // For file datasets it covers the sorted file list (names and sizes) and the pipeline.
  std::string fingerprint;
  // What `fingerprint` hashes: the kind, then name=value per setting, e.g. "synthetic/v1
  // seed=0 size=10000 image=32 classes=10". Workers send it, so that a trainer names the
  // settings that differ rather than two hashes. Empty from a worker of an older tandem.
  std::string description;
  // Per-channel normalisation the trainer applies on its device after scaling values to
  // [0, 1] (uint8 / 255): x = (x - mean[c]) / std[c]. Empty: none. Set for image datasets
  // (ImageNet's for imagefolder, MNIST's / Fashion-MNIST's for mnist, or normalize(...)).
  std::vector<float> mean, std;
  // The name of each label, in label order, where the dataset's labels have names
  // (imagefolder: its class folders); else empty. Written into the saved model.json.
  std::vector<std::string> class_names;

  // Bytes of one sample's image (0 without one).
  size_t sample_bytes() const;
  // The sample's fields: `fields`, or else "image" (dtype, sample_shape) and "label"
  // (int64 []).
  std::vector<FieldSpec> schema() const;
  // Whether the schema has an "image" / a "label" field (always, when `fields` is empty).
  bool has_image() const;
  bool has_label() const;
  // The schema's fields other than image and label, in order: those of Batch::fields.
  std::vector<FieldSpec> extra_fields() const;
  // Adds `extra` (fields other than image and label, e.g. a python() step's) after the
  // schema's own: `fields` becomes schema() + extra. Nothing changes when `extra` is empty.
  // REQUIRES: sample_shape and dtype set.
  void add_fields(const std::vector<FieldSpec>& extra);
};

// Where Dataset::produce_fields writes one sample's extra fields (DatasetInfo::
// extra_fields(), same order): each dense field's row in the batch, and for each ragged
// field a growable buffer the sample's rows are appended to (the batch gathers them).
struct FieldsOut {
  std::vector<std::span<std::byte>> dense;         // per extra field; empty span for a ragged one
  std::vector<std::vector<std::byte>*> ragged;     // per extra field; null for a dense one
};

// Where one sample of a batch goes: its image bytes and, for a dataset with other fields,
// their rows (fields is null without them).
struct SampleOut {
  std::span<std::byte> image;
  const FieldsOut* fields = nullptr;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual const DatasetInfo& info() const = 0;
  // Writes sample `index` as augmented in `epoch` into `out` (info().sample_bytes()
  // bytes) and returns its label. Thread-safe. Throws std::out_of_range for a bad index.
  int64_t produce(uint64_t index, uint32_t epoch, std::span<std::byte> out) const {
    return make_sample(index, epoch, out, nullptr);
  }
  // produce() with the sample's extra fields too (`extra` as FieldsOut says; `out` is empty
  // without an image; the label is 0 without one).
  int64_t produce_fields(uint64_t index, uint32_t epoch, std::span<std::byte> out, const FieldsOut& extra) const {
    return make_sample(index, epoch, out, &extra);
  }

  // Under --on-bad-sample skip, what could not be used: one "path: problem" line per
  // distinct file (or empty class folder), in the order first met. Thread-safe.
  virtual std::vector<std::string> skipped() const { return {}; }
  // How many samples were substituted by another (a bad file counts again each time it
  // is asked for). Thread-safe.
  virtual uint64_t skipped_count() const { return 0; }
  // The most shared memory its Python processes (python:FILE:NAME, a python() step) may
  // map together: DataOptions::python_shm_bytes when it has them, else 0. A worker keeps
  // it out of its budget for batches in flight.
  virtual uint64_t shared_memory_bytes() const { return 0; }

  // Users' code must be deterministic (docs/datasets.md): why this dataset's samples are
  // not the same bytes each time they are made (a few are made twice in one process and
  // once in another), or "" when they are, or when it runs no users' code. Computed at the
  // first call, then kept. Thread-safe.
  virtual std::string determinism_problem() const { return ""; }

  // Datasets that read each sample from storage (imagefolder, webdataset, manifest) with
  // --io-threads above 0: starts fetching the stored bytes of samples `indices` on their
  // I/O threads (read_ahead.h) and returns what produce_read() takes them from; null when
  // there is nothing to fetch. Call it when a batch is asked for. Thread-safe.
  virtual std::unique_ptr<SampleReads> read_ahead(const std::vector<uint64_t>& /*indices*/) const { return nullptr; }
  // produce_fields() of sample `index`, the one at `position` of the read_ahead() that gave
  // `reads`, from the bytes fetched for it (or read now, when they were not); `extra` is
  // null for a dataset without extra fields.
  virtual int64_t produce_read(SampleReads& /*reads*/, size_t /*position*/, uint64_t index, uint32_t epoch,
                               std::span<std::byte> out, const FieldsOut* extra) const {
    return make_sample(index, epoch, out, extra);
  }
  // The most fetched bytes its read-ahead may hold (DataOptions::read_ahead_bytes), 0
  // without one. A worker keeps them out of its budget for batches in flight.
  virtual uint64_t read_ahead_bytes() const { return 0; }
  // Datasets that make many samples at once more cheaply than one by one (a Python
  // dataset: one request to one of its processes for them all) make samples `indices` of
  // `epoch`, sample i into out(i) (valid until out is called again), and return their labels, the
  // same bytes and labels as produce_fields() of each. Others return nullopt: make them
  // one by one. Thread-safe.
  virtual std::optional<std::vector<int64_t>> make_many(std::span<const uint64_t> /*indices*/, uint32_t /*epoch*/,
                                                        const std::function<SampleOut(size_t)>& /*out*/) const {
    return std::nullopt;
  }
  // Its read-ahead, for its numbers (reads in flight, engine); null without one.
  virtual const ReadAhead* reader() const { return nullptr; }

 protected:
  // What every dataset implements, behind produce() and produce_fields(): sample `index`
  // of `epoch` into `out`, and its extra fields into `extra` unless it is null (a dataset
  // without extra fields ignores it); returns the label.
  virtual int64_t make_sample(uint64_t index, uint32_t epoch, std::span<std::byte> out,
                              const FieldsOut* extra) const = 0;
};

// What is wrong with `batch` as a batch of this dataset (sample shape, label count and
// range, payload size, each extra field's name, dtype, shape, lengths and size against
// the schema), or empty when nothing is. A source that sends such a batch is
// broken: the feed drops it.
std::string batch_problem(const Batch& batch, const DatasetInfo& info);

// What is wrong with `info` as the description of a dataset a peer serves (shape, class
// count, size, normalisation, name, the schema's names, dtypes and shapes and their
// agreement with the image and label), or empty when nothing is. A trainer that learns its
// dataset from a worker checks the worker's words with it.
std::string info_problem(const DatasetInfo& info);

// Why tandem's classification trainer cannot train on this dataset (no 'image' or no
// 'label' field, naming the fields it has and the way to consume them), or empty.
std::string classification_problem(const DatasetInfo& info);

// What is wrong with info.fields as a schema (empty: nothing): a name that is not letters,
// digits, _ . - (at most 100), two fields of one name (a ragged field's NAME_lengths and
// NAME_offsets included, as tandem.Feed names them), over 64 fields or 8 dimensions, a
// dimension out of range (-1 only first), an 'image' that disagrees with sample_shape and
// dtype, a 'label' that is not int64 [].
std::string schema_problem(const DatasetInfo& info);

// False when `opts` names files (imagefolder, mnist, webdataset, manifest: a PATH or the SageMaker channel;
// python:FILE:NAME: FILE) that this host does not have; true for generated datasets. A
// trainer without the files learns the dataset from its workers.
bool dataset_is_here(const DataOptions& opts);

// Builds the dataset that `opts.data` names: synthetic | blur-benchmark | premade |
// imagefolder[:PATH] | mnist[:PATH] | webdataset[:PATH] (without PATH:
// <sagemaker root>/input/data/<channel>) | manifest:FILE | python:FILE:NAME
// (python_dataset.h: starts its Python processes).
// File datasets index their files here, once. Throws ConfigError for unknown names,
// settings the dataset cannot honour, and unusable data (naming the path).
std::shared_ptr<const Dataset> make_dataset(const DataOptions& opts);

// The dtype make_dataset(opts) produces samples in, without building it: uint8 for
// imagefolder, webdataset, manifest, mnist and python, float32 for the others.
DType dataset_dtype(const DataOptions& opts);

// The value of setting `name` in a dataset's description ("file" of "python/v1 code=..
// file=my_data.py name=Flowers ..." is "my_data.py"), or "" when it has none.
std::string description_setting(const std::string& description, const std::string& name);

// How a peer's dataset differs from ours, from the two descriptions (DatasetInfo::
// description): one "image size 64, this trainer expects 32 (--image-size)" per setting
// that differs, joined by "; " (values shortened and escaped). Empty when either
// description is empty or they name no differing setting.
// `who` names our side ("this trainer", "this feed").
std::string describe_difference(const std::string& theirs, const std::string& ours,
                                std::string_view who = "this trainer");

// The same against this host's own settings, for a host that learns its dataset from a
// worker (no copy of the files here): the settings `ours` fixes without the files and
// sets away from their defaults (the kind of dataset; seed, --dataset-size; imagefolder's
// pipeline, from --pipeline, --image-size or --split, and pixel limit; a Python dataset's
// file name, its bytes when this host has the file, NAME and --data-args) that the worker's description says otherwise. A setting left at
// its default takes the worker's.
std::string describe_difference(const std::string& theirs, const DataOptions& ours,
                                std::string_view who = "this trainer");

// "[3,224,224]": a shape as messages print it.
std::string shape_text(const std::vector<int64_t>& shape);

// Hex FNV-1a of a description string; stable across builds and machines.
std::string fingerprint_of(const std::string& description);

// FNV-1a 64 of `data` continuing from `hash`, for fingerprints built piece by piece.
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
uint64_t fnv1a(std::string_view data, uint64_t hash = kFnvOffset);

// `h` as 16 lowercase hex digits, the form fingerprints and descriptions print hashes in.
std::string hex64(uint64_t h);

}  // namespace tandem::data
