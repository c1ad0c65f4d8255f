#include "tandem/data/batching/batch_maker.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "tandem/common/cpu_time.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/convert.h"

namespace tandem::data {
namespace {

// Shared by the chunks of one batch; the last chunk to finish hands the batch on.
struct Job {
  BatchRequest request;
  std::unique_ptr<SampleReads> reads;  // the samples' stored bytes, fetched ahead; null without

  Batch batch;
  RaggedRows ragged;
  std::vector<uint64_t> rows;  // row_digest() of each sample, taken while it is in cache
  std::atomic<int> remaining{0};
  std::atomic<double> cpu_seconds{0};
  std::mutex mu;
  std::exception_ptr error;  // GUARDED_BY(mu)
  std::function<void(Batch)> done;
  std::function<void(std::exception_ptr)> failed;
};

// Where sample i's other fields go: their rows in the batch (ragged: `ragged`).
FieldsOut fields_out(Batch& batch, RaggedRows& ragged, size_t i) {
  FieldsOut out;
  for (size_t f = 0; f < batch.fields.size(); ++f) {
    Field& field = batch.fields[f];
    const bool is_ragged = !ragged[f].empty();
    const size_t row = is_ragged ? 0 : field.data.size() / batch.indices.size();
    out.dense.push_back(is_ragged ? std::span<std::byte>() : std::span<std::byte>(field.data.data() + i * row, row));
    out.ragged.push_back(is_ragged ? &ragged[f][i] : nullptr);
  }
  return out;
}

// Makes samples [begin, end) of the batch, each image at `image(i)`, their labels into
// the batch's labels (where the dataset has them) and their other fields into their rows:
// one call to the dataset's batch entry (make_samples), which takes `reads`' bytes.
void make_range(const Dataset& dataset, const BatchRequest& request, size_t begin, size_t end,
                const std::function<std::span<std::byte>(size_t)>& image, Batch& batch, RaggedRows& ragged,
                SampleReads* reads) {
  FieldsOut fields;
  const auto out = [&](size_t k) {
    const size_t i = begin + k;
    fields = fields_out(batch, ragged, i);
    return SampleOut{image(i), batch.fields.empty() ? nullptr : &fields};
  };
  const std::span<const uint64_t> indices(request.indices.data() + begin, end - begin);
  const std::vector<int64_t> labels = dataset.make_samples(indices, request.epoch, out, reads, begin);
  if (!batch.labels.empty()) std::copy(labels.begin(), labels.end(), batch.labels.begin() + static_cast<long>(begin));
}

template <typename T>
void make_converted(const Dataset& dataset, const BatchRequest& request, size_t begin, size_t end, DType wire,
                    void (*convert)(const T*, size_t, DType, std::byte*), Batch& batch, RaggedRows& ragged,
                    SampleReads* reads, uint64_t* rows) {
  const size_t values = dataset.info().sample_bytes() / sizeof(T);
  const size_t wire_bytes = values * dtype_size(wire);
  thread_local std::vector<T> scratch;
  scratch.resize(values);
  const auto in_scratch = [&](size_t) { return std::as_writable_bytes(std::span<T>(scratch)); };
  for (size_t i = begin; i < end; ++i) {
    make_range(dataset, request, i, i + 1, in_scratch, batch, ragged, reads);
    convert(scratch.data(), values, wire, batch.data.data() + i * wire_bytes);
    rows[i] = row_digest(batch.data.data() + i * wire_bytes, wire_bytes);
  }
}

// The ragged fields' rows, gathered in batch order: one copy of the small per-sample
// buffers (boxes, tokens) into the field's payload, and their lengths.
void gather_ragged(Batch& batch, RaggedRows& ragged, const std::vector<FieldSpec>& specs) {
  for (size_t f = 0; f < batch.fields.size(); ++f) {
    if (!specs[f].ragged()) continue;
    Field& field = batch.fields[f];
    const size_t unit = std::max<size_t>(1, specs[f].unit_bytes());
    size_t total = 0;
    for (const auto& rows : ragged[f]) total += rows.size();
    field.data = Buffer(total);
    field.lengths.clear();
    size_t at = 0;
    for (auto& rows : ragged[f]) {
      if (!rows.empty()) std::memcpy(field.data.data() + at, rows.data(), rows.size());
      at += rows.size();
      field.lengths.push_back(static_cast<int64_t>(rows.size() / unit));
      std::vector<std::byte>().swap(rows);
    }
    field.shape[0] = static_cast<int64_t>(total / unit);
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

Batch BatchMaker::allocate(const BatchRequest& request, RaggedRows& ragged) const {
  const DatasetInfo& info = dataset_->info();
  const size_t n = request.indices.size();
  Batch batch;
  batch.sequence = request.sequence;
  batch.epoch = request.epoch;
  batch.dtype = wire_;
  batch.shape = {static_cast<int64_t>(n)};
  batch.shape.insert(batch.shape.end(), info.sample_shape.begin(), info.sample_shape.end());
  if (info.has_label()) batch.labels.resize(n);
  batch.indices = request.indices;
  batch.data = Buffer(n * info.sample_bytes() / dtype_size(info.dtype) * dtype_size(wire_));
  // Dense fields get their rows in the batch now; ragged ones a buffer per sample.
  for (const FieldSpec& spec : info.extra_fields()) {
    Field& f = batch.fields.emplace_back();
    f.name = spec.name;
    f.dtype = spec.dtype;
    f.shape = {static_cast<int64_t>(n)};
    f.shape.insert(f.shape.end(), spec.shape.begin() + (spec.ragged() ? 1 : 0), spec.shape.end());
    if (!spec.ragged()) f.data = Buffer(n * spec.unit_bytes());
    ragged.emplace_back(spec.ragged() ? n : 0);
  }
  return batch;
}

void BatchMaker::fill(Batch& batch, const BatchRequest& request, size_t begin, size_t end, RaggedRows& ragged,
                      SampleReads* reads, uint64_t* rows) const {
  const DatasetInfo& info = dataset_->info();
  const size_t bytes = info.sample_bytes();
  if (wire_ == info.dtype) {
    const auto in_place = [&](size_t i) { return std::span<std::byte>(batch.data.data() + i * bytes, bytes); };
    make_range(*dataset_, request, begin, end, in_place, batch, ragged, reads);
    for (size_t i = begin; i < end; ++i) rows[i] = row_digest(batch.data.data() + i * bytes, bytes);
    return;
  }
  // Each sample is made in scratch in the dataset's own type (uint8 for image datasets,
  // else float32), then converted into place.
  if (info.dtype == DType::kUInt8) {
    make_converted<uint8_t>(*dataset_, request, begin, end, wire_, convert_from_uint8, batch, ragged, reads, rows);
  } else {
    make_converted<float>(*dataset_, request, begin, end, wire_, convert_from_float, batch, ragged, reads, rows);
  }
}

std::unique_ptr<SampleReads> BatchMaker::read_ahead(const BatchRequest& request) const {
  return dataset_->read_ahead(request.indices);
}

Batch BatchMaker::make(const BatchRequest& request, SampleReads* reads) const {
  const double start = work_cpu_seconds();
  RaggedRows ragged;
  Batch batch = allocate(request, ragged);
  std::vector<uint64_t> rows(request.indices.size());
  fill(batch, request, 0, request.indices.size(), ragged, reads, rows.data());
  gather_ragged(batch, ragged, dataset_->info().extra_fields());
  batch.digest = batch_digest(batch, &rows);
  batch.compute_seconds = work_cpu_seconds() - start;
  if (reads) batch.reads_wanted = reads->wanted_more();
  return batch;
}

void BatchMaker::make_async(BatchRequest request, std::function<void(Batch)> done,
                            std::function<void(std::exception_ptr)> failed) {
  auto job = std::make_shared<Job>();
  job->batch = allocate(request, job->ragged);
  job->rows.resize(request.indices.size());
  job->reads = read_ahead(request);  // fetching starts now, while the chunks wait for threads
  job->request = std::move(request);
  job->done = std::move(done);
  job->failed = std::move(failed);
  const size_t n = job->request.indices.size();
  const size_t chunks = std::max<size_t>(1, std::min<size_t>(n, pool_->size()));
  job->remaining = static_cast<int>(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    const size_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    pool_->submit([this, job, begin, end] {
      const double start = work_cpu_seconds();
      try {
        fill(job->batch, job->request, begin, end, job->ragged, job->reads.get(), job->rows.data());
      } catch (...) {
        std::lock_guard lock(job->mu);
        if (!job->error) job->error = std::current_exception();
      }
      const double cpu = work_cpu_seconds() - start;
      emulate_slower(cpu, slowdown_);
      job->cpu_seconds.fetch_add(cpu * slowdown_);
      if (job->remaining.fetch_sub(1) != 1) return;
      if (job->reads) job->batch.reads_wanted = job->reads->wanted_more();
      job->reads.reset();  // bytes of samples a failed chunk never reached go back now
      if (job->error) return job->failed(job->error);
      gather_ragged(job->batch, job->ragged, dataset().info().extra_fields());
      job->batch.digest = batch_digest(job->batch, &job->rows);  // on the maker's cores (scheduler.h compares copies)
      job->batch.compute_seconds = job->cpu_seconds.load();
      job->done(std::move(job->batch));
    });
  }
}

}  // namespace tandem::data
