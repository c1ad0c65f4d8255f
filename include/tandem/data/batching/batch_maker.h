// Turns a BatchRequest into a finished Batch, spreading its samples over a pool.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tandem/common/thread_pool.h"
#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"

namespace tandem::data {

// Each ragged field's rows per sample while a batch is made ([field][sample]; empty for
// a dense field), gathered into the field once every sample is done.
using RaggedRows = std::vector<std::vector<std::vector<std::byte>>>;

class BatchMaker {
 public:
  // `pool` may be null: then only make() is available. Batches are built as `wire`,
  // by default the dataset's own dtype. float32 samples convert to any wire dtype; uint8
  // samples (image datasets) too, as value / 255 for the float types. Conversion is
  // sample by sample. Throws ConfigError for a dataset dtype it cannot convert from.
  BatchMaker(std::shared_ptr<const Dataset> dataset, ThreadPool* pool, std::optional<DType> wire = std::nullopt);

  // Builds the batch on the pool, in chunks of samples so one batch uses every thread.
  // Exactly one of `done` / `failed` runs, on the pool thread that finishes last.
  void make_async(BatchRequest request, std::function<void(Batch)> done,
                  std::function<void(std::exception_ptr)> failed);

  // Builds the batch on the calling thread, its samples' stored bytes from `reads` (what
  // read_ahead(request) returned) where given.
  Batch make(const BatchRequest& request, SampleReads* reads = nullptr) const;

  // Starts fetching the stored bytes of the request's samples (Dataset::read_ahead): null
  // for a dataset that reads no files or reads none ahead. make_async() calls it itself.
  std::unique_ptr<SampleReads> read_ahead(const BatchRequest& request) const;

  const Dataset& dataset() const { return *dataset_; }

  // Emulates cores `k` times slower for make_async (simulations: --emulate-slowdown):
  // each chunk is followed by a sleep of k-1 times its CPU time, and the batch reports
  // k times the CPU time as its compute time. k >= 1.
  void set_slowdown(double k) { slowdown_ = k; }

 private:
  Batch allocate(const BatchRequest& request, RaggedRows& ragged) const;
  // Makes samples [begin, end) into `batch`, and row_digest() of each into rows[i].
  void fill(Batch& batch, const BatchRequest& request, size_t begin, size_t end, RaggedRows& ragged,
            SampleReads* reads, uint64_t* rows) const;

  std::shared_ptr<const Dataset> dataset_;
  ThreadPool* pool_;
  DType wire_;
  double slowdown_ = 1;
};

}  // namespace tandem::data
