// A dataset is a source plus its augmentation pipeline: index + epoch -> finished sample.
// The interface every kind implements; what a dataset is (DatasetInfo) is in
// dataset_info.h, and which dataset --data names in sources/source_kinds.h.
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

#include "tandem/data/core/dataset_info.h"
#include "tandem/data/io/read_ahead.h"

namespace tandem::data {

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
  // map together: PythonRuntime::shm_bytes when it has them, else 0. A worker keeps
  // it out of its budget for batches in flight.
  virtual uint64_t shared_memory_bytes() const { return 0; }

  // Users' code must be deterministic (docs/datasets.md): why this dataset's samples are
  // not the same bytes each time they are made (a few are made twice in one process and
  // once in another), or "" when they are, or when it runs no users' code. Computed at the
  // first call, then kept. Thread-safe.
  virtual std::string determinism_problem() const { return ""; }

  // The batch path's one entry: samples `indices` of `epoch`, sample k into out(k) (valid
  // until out is called again); returns their labels (0 without a label), the same bytes
  // and labels as produce_fields() of each. `reads`: what read_ahead() gave for the batch
  // whose samples `first`, `first` + 1, ... these are, or null. The default makes them one
  // by one (make_sample); a dataset that makes many at once more cheaply (a Python
  // dataset: one request to one of its processes) or takes them from its read-ahead
  // overrides it. Thread-safe.
  virtual std::vector<int64_t> make_samples(std::span<const uint64_t> indices, uint32_t epoch,
                                            const std::function<SampleOut(size_t)>& out,
                                            SampleReads* reads = nullptr, size_t first = 0) const;

  // Datasets that read each sample from storage (imagefolder, webdataset, manifest) with
  // --io-threads above 0: starts fetching the stored bytes of samples `indices` on their
  // read-ahead (read_ahead.h) and returns what make_samples() takes them from; null when
  // there is nothing to fetch. Call it when a batch is asked for. Thread-safe.
  virtual std::unique_ptr<SampleReads> read_ahead(const std::vector<uint64_t>& /*indices*/) const { return nullptr; }
  // Its read-ahead, for its numbers (reads in flight, engine, bytes); null without one.
  virtual const ReadAhead* reader() const { return nullptr; }
  // The most fetched bytes its read-ahead may hold (ReadAheadOptions::max_bytes), 0
  // without one. A worker keeps them out of its budget for batches in flight.
  uint64_t read_ahead_bytes() const { return reader() ? reader()->options().max_bytes : 0; }

 protected:
  // What every dataset implements, behind produce(), produce_fields() and the default
  // make_samples(): sample `index`
  // of `epoch` into `out`, and its extra fields into `extra` unless it is null (a dataset
  // without extra fields ignores it); returns the label.
  virtual int64_t make_sample(uint64_t index, uint32_t epoch, std::span<std::byte> out,
                              const FieldsOut* extra) const = 0;
};

}  // namespace tandem::data
