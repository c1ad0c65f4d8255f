// Values that travel between the data plane and the training loop. Batches carry
// megabytes, so they are move-only: an expensive copy has to be spelled out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data/core/buffer.h"

namespace tandem::data {

// kInt32 and kInt64 are for named fields (FieldSpec) only: images travel in the first four.
enum class DType : uint8_t { kFloat32, kBFloat16, kFloat16, kUInt8, kInt32, kInt64 };

// The dtype as flags, settings and summaries write it: "float32", "bfloat16", "float16",
// "uint8", "int32", "int64".
const char* dtype_name(DType dtype);
// Bytes per value of `dtype`: 4, 2, 2, 1, 4 or 8.
size_t dtype_size(DType dtype);

// One named field of every sample, as a dataset's schema (DatasetInfo::schema()) lists
// it: "image" uint8 [3,224,224], "label" int64 [], "boxes" float32 [-1,4].
struct FieldSpec {
  std::string name;
  DType dtype = DType::kUInt8;
  // Per sample, without the batch dimension; [] for a number. Ragged: shape[0] is -1 (the
  // first dimension varies between samples, e.g. a box count) and the rest are fixed.
  std::vector<int64_t> shape;

  bool ragged() const { return !shape.empty() && shape[0] < 0; }
  // Bytes of one sample (dense) or of one row of the first dimension (ragged).
  size_t unit_bytes() const;
  bool operator==(const FieldSpec&) const = default;
};

// "boxes float32 [-1,4]": a field spec as errors and descriptions write it.
std::string field_spec_text(const FieldSpec& spec);

// One named field of a batch beyond the image payload and the labels. Dense: shape is
// [N, ...spec shape] and lengths is empty. Ragged: the samples' rows are concatenated,
// shape is [total rows, ...spec shape[1:]] and lengths [N] says how many rows are each
// sample's, in batch order.
struct Field {
  std::string name;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> shape;
  std::vector<int64_t> lengths;
  Buffer data;  // row-major, shape x dtype

  Field() = default;
  Field(Field&&) = default;
  Field& operator=(Field&&) = default;
  Field(const Field&) = delete;
  Field& operator=(const Field&) = delete;

  // Bytes that shape x dtype needs (0 for a negative dimension).
  size_t expected_bytes() const;
};

// One batch the trainer wants: which samples, in which epoch, delivered in which order.
struct BatchRequest {
  uint64_t sequence = 0;
  uint32_t epoch = 0;
  std::vector<uint64_t> indices;
};

// A batch's "image" field is its payload (shape, dtype, data) and its "label" field its
// labels, as the classification trainer reads them; any other fields of the dataset's
// schema travel in `fields`. A dataset without an image sends shape [N] and no data; one
// without a label sends no labels.
struct Batch {
  uint64_t sequence = 0;
  uint32_t epoch = 0;
  std::vector<int64_t> shape;   // [N, C, H, W]; [N] without an image
  DType dtype = DType::kFloat32;
  std::vector<int64_t> labels;  // N; empty without a label
  std::vector<uint64_t> indices;  // N: the samples it was made from (echoed over the wire)
  Buffer data;                  // row-major payload, shape x dtype
  std::vector<Field> fields;    // the schema's other fields, in schema order
  double compute_seconds = 0;   // CPU-seconds spent producing it
  // Samples more its source's read-ahead would like asked for (SampleReads::wanted_more();
  // negative: more than it needs; 0 without one). The scheduler's request depth follows it.
  int64_t reads_wanted = 0;
  // batch_digest() of it, computed where it was made (a worker's cores, not the GPU
  // host's), and carried on the wire; nullopt until someone computes it.
  std::optional<uint64_t> digest;
  int source = -1;              // which feeder source delivered it (set by the feeder)

  Batch() = default;
  Batch(Batch&&) = default;
  Batch& operator=(Batch&&) = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  int64_t size() const { return shape.empty() ? 0 : shape[0]; }
  // What it carries: payload, labels, indices and fields (about its size on the wire).
  size_t payload_bytes() const {
    size_t n = data.size() + labels.size() * sizeof(int64_t) + indices.size() * sizeof(uint64_t);
    for (const Field& f : fields) n += f.data.size() + f.lengths.size() * sizeof(int64_t);
    return n;
  }
};

// The hash of one sample's row of a batch's payload.
uint64_t row_digest(const std::byte* row, size_t bytes);
// One hash of a batch's bytes (its pixels, labels and fields): two copies of one batch
// made from deterministic data have the same. It combines the row_digest() of each sample's
// row (given in `rows` by whoever made them while they were in cache, else computed here).
uint64_t batch_digest(const Batch& b, const std::vector<uint64_t>* rows = nullptr);
// The digest it came with, else batch_digest(b).
inline uint64_t digest_of(const Batch& b) { return b.digest ? *b.digest : batch_digest(b); }

}  // namespace tandem::data
