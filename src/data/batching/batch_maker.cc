#include "tandem/data/batching/batch_maker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <thread>

#include "tandem/common/error.h"
#include "tandem/data/batching/convert.h"

namespace tandem::data {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Shared by the chunks of one batch; the last chunk to finish hands the batch on.
struct Job {
  BatchRequest request;
  Batch batch;
  std::atomic<int> remaining{0};
  std::atomic<double> cpu_seconds{0};
  std::mutex mu;
  std::exception_ptr error;  // GUARDED_BY(mu)
  std::function<void(Batch)> done;
  std::function<void(std::exception_ptr)> failed;
};

template <typename T>
void make_converted(const Dataset& dataset, const BatchRequest& request, size_t begin, size_t end, DType wire,
                    void (*convert)(const T*, size_t, DType, std::byte*), Batch& batch) {
  const size_t values = dataset.info().sample_bytes() / sizeof(T);
  const size_t wire_bytes = values * dtype_size(wire);
  thread_local std::vector<T> scratch;
  scratch.resize(values);
  for (size_t i = begin; i < end; ++i) {
    batch.labels[i] = dataset.produce(request.indices[i], request.epoch, std::as_writable_bytes(std::span<T>(scratch)));
    convert(scratch.data(), values, wire, batch.data.data() + i * wire_bytes);
  }
}

}  // namespace

BatchMaker::BatchMaker(std::shared_ptr<const Dataset> dataset, ThreadPool* pool, std::optional<DType> wire)
    : dataset_(std::move(dataset)), pool_(pool), wire_(wire.value_or(dataset_->info().dtype)) {
  const DType own = dataset_->info().dtype;
  if (wire_ != own && own != DType::kFloat32 && own != DType::kUInt8) {
    throw ConfigError(std::string("cannot send ") + dtype_name(own) + " samples of '" + dataset_->info().name +
                      "' as " + dtype_name(wire_) + ": leave --wire-dtype unset");
  }
}

Batch BatchMaker::allocate(const BatchRequest& request) const {
  const DatasetInfo& info = dataset_->info();
  Batch batch;
  batch.sequence = request.sequence;
  batch.epoch = request.epoch;
  batch.dtype = wire_;
  batch.shape = {static_cast<int64_t>(request.indices.size())};
  batch.shape.insert(batch.shape.end(), info.sample_shape.begin(), info.sample_shape.end());
  batch.labels.resize(request.indices.size());
  batch.indices = request.indices;
  batch.data = Buffer(request.indices.size() * info.sample_bytes() / dtype_size(info.dtype) * dtype_size(wire_));
  return batch;
}

void BatchMaker::fill(Batch& batch, const BatchRequest& request, size_t begin, size_t end) const {
  const DatasetInfo& info = dataset_->info();
  const size_t bytes = info.sample_bytes();
  if (wire_ == info.dtype) {
    for (size_t i = begin; i < end; ++i) {
      batch.labels[i] = dataset_->produce(request.indices[i], request.epoch,
                                          std::span<std::byte>(batch.data.data() + i * bytes, bytes));
    }
    return;
  }
  // Each sample is made in scratch in the dataset's own type (uint8 for image datasets,
  // else float32), then converted into place.
  if (info.dtype == DType::kUInt8) {
    make_converted<uint8_t>(*dataset_, request, begin, end, wire_, convert_from_uint8, batch);
  } else {
    make_converted<float>(*dataset_, request, begin, end, wire_, convert_from_float, batch);
  }
}

Batch BatchMaker::make(const BatchRequest& request) const {
  const double start = thread_cpu_seconds();
  Batch batch = allocate(request);
  fill(batch, request, 0, request.indices.size());
  batch.compute_seconds = thread_cpu_seconds() - start;
  return batch;
}

void BatchMaker::make_async(BatchRequest request, std::function<void(Batch)> done,
                            std::function<void(std::exception_ptr)> failed) {
  auto job = std::make_shared<Job>();
  job->batch = allocate(request);
  job->request = std::move(request);
  job->done = std::move(done);
  job->failed = std::move(failed);
  const size_t n = job->request.indices.size();
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(n, pool_->size()));
  job->remaining = static_cast<int>(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    const size_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    pool_->submit([this, job, begin, end] {
      const double start = thread_cpu_seconds();
      try {
        fill(job->batch, job->request, begin, end);
      } catch (...) {
        std::lock_guard lock(job->mu);
        if (!job->error) job->error = std::current_exception();
      }
      const double cpu = thread_cpu_seconds() - start;
      if (slowdown_ > 1) std::this_thread::sleep_for(std::chrono::duration<double>((slowdown_ - 1) * cpu));
      job->cpu_seconds.fetch_add(cpu * slowdown_);
      if (job->remaining.fetch_sub(1) != 1) return;
      if (job->error) return job->failed(job->error);
      job->batch.compute_seconds = job->cpu_seconds.load();
      job->done(std::move(job->batch));
    });
  }
}

}  // namespace tandem::data
