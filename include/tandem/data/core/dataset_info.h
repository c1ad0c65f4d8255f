// What a dataset is (DatasetInfo: its size, its samples' fields, its fingerprint), and
// the checks of a peer's words and batches against it. Torch-free; the floor every part
// of data/ stands on, with the Dataset interface (dataset.h) and the Batch (batch.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tandem/data/core/batch.h"

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

// "[3,224,224]": a shape as messages print it.
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace tandem::data
