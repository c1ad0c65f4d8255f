// Turns a BatchRequest into a finished Batch, spreading its samples over a pool.
#pragma once

#include <exception>
#include <functional>
#include <memory>

#include "tandem/data/batch.h"
#include "tandem/data/dataset.h"
#include "tandem/data/thread_pool.h"

namespace tandem::data {

class BatchMaker {
 public:
  // `pool` may be null: then only make() is available. Batches are built as `wire`
  // (the dataset's samples are float32; other dtypes are converted sample by sample).
  BatchMaker(std::shared_ptr<const Dataset> dataset, ThreadPool* pool, DType wire = DType::kFloat32);

  // Builds the batch on the pool, in chunks of samples so one batch uses every thread.
  // Exactly one of `done` / `failed` runs, on the pool thread that finishes last.
  void make_async(BatchRequest request, std::function<void(Batch)> done,
                  std::function<void(std::exception_ptr)> failed);

  // Builds the batch on the calling thread.
  Batch make(const BatchRequest& request) const;

  const Dataset& dataset() const { return *dataset_; }

 private:
  Batch allocate(const BatchRequest& request) const;
  void fill(Batch& batch, const BatchRequest& request, size_t begin, size_t end) const;

  std::shared_ptr<const Dataset> dataset_;
  ThreadPool* pool_;
  DType wire_;
};

}  // namespace tandem::data
