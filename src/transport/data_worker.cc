#include "tandem/transport/data_worker.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <cstdio>
#include <random>
#include <string>

#include "tandem/common/error.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/transport/byte_budget.h"

namespace tandem::transport {
namespace {

// 64 random bits in hex: this process among every worker (WorkerInfo::instance).
std::string random_instance() {
  std::random_device device;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}

// Bytes of one sample's dense extra fields (a ragged field's rows are not known ahead).
uint64_t extra_field_bytes(const data::DatasetInfo& info) {
  uint64_t n = 0;
  for (const data::FieldSpec& f : info.extra_fields()) n += f.ragged() ? 0 : f.unit_bytes();
  return n;
}

// --max-inflight-mb less what the dataset's Python processes may map and its read-ahead
// may hold (split_inflight): together they stay within it.
uint64_t batch_budget(const WorkerOptions& opts, const data::Dataset& dataset) {
  return split_inflight(opts.max_inflight_mb).batch_bytes(dataset.shared_memory_bytes() + dataset.read_ahead_bytes());
}

}  // namespace

ServedBatch::ServedBatch(ServedBatch&& o) noexcept
    : batch_(std::move(o.batch_)), budget_(o.budget_), bytes_(std::exchange(o.bytes_, 0)) {}

ServedBatch::~ServedBatch() {
  if (bytes_) budget_->release(bytes_);
}

ServedData::ServedData(std::shared_ptr<const data::Dataset> d, ThreadPool* pool, data::DType wire, double slowdown)
    : dataset(std::move(d)),
      maker(std::make_unique<data::BatchMaker>(dataset, pool, wire)),
      bytes_per_sample(dataset->info().sample_bytes() / data::dtype_size(dataset->info().dtype) * data::dtype_size(wire) +
                       sizeof(int64_t) + extra_field_bytes(dataset->info())) {
  maker->set_slowdown(slowdown);
}

ServedData::~ServedData() = default;

DataWorker::DataWorker(std::shared_ptr<const data::Dataset> dataset, const WorkerOptions& opts, std::string host,
                       data::DType wire, DatasetFor dataset_for)
    : opts_(opts), host_(std::move(host)), instance_(random_instance()),
      pool_(std::make_unique<ThreadPool>(opts.threads > 0 ? opts.threads : available_cores())),
      main_(std::make_unique<ServedData>(std::move(dataset), pool_.get(), wire, opts.emulate_slowdown)),
      dataset_for_(std::move(dataset_for)),
      budget_(std::make_unique<ByteBudget>(batch_budget(opts, *main_->dataset))) {
  if (!opts.pool_jobs.empty()) {
    const int most = std::max(2, static_cast<int>(pool_->size()));
    shared_ = std::make_unique<SharedMaker>(SharedMakerOptions{
        static_cast<uint64_t>(std::max<int64_t>(opts.share_window_mb, 0)) << 20, most});
  }
}

DataWorker::~DataWorker() {
  stop();
  if (shared_) shared_->stop();
  pool_.reset();  // runs what was submitted: callbacks refer to the makers and streams' states
}

const ServedData& DataWorker::served(const std::string& settings) {
  if (settings.empty() || !dataset_for_) return *main_;
  std::lock_guard lock(data_mu_);
  std::unique_ptr<ServedData>& d = others_[settings];
  if (!d) {
    PoolDataset made = dataset_for_(settings);  // throws ConfigError for settings it cannot make
    d = std::make_unique<ServedData>(std::move(made.dataset), pool_.get(), made.wire, opts_.emulate_slowdown);
  }
  return *d;
}

WorkerInfo DataWorker::describe(const std::string& settings) {
  const data::Dataset& dataset = *served(settings).dataset;
  WorkerInfo info;
  info.dataset = dataset.info();
  info.dataset.fields = info.dataset.schema();  // the image and the label named too
  info.threads = pool_->size();
  info.host = host_;
  info.skipped = dataset.skipped();
  info.skipped_count = dataset.skipped_count();
  info.determinism_problem = dataset.determinism_problem();  // checked at the worker's start, kept
  info.instance = instance_;
  return info;
}

std::map<std::string, JobTally> DataWorker::job_tallies() const {
  return shared_ ? shared_->tallies() : std::map<std::string, JobTally>{};
}

std::unique_ptr<BatchStream> DataWorker::open_stream(std::function<void()> on_stall, int job_ranks, std::string job,
                                                     double weight, const std::string& settings) {
  const ServedData& data = served(settings);
  {
    std::lock_guard lock(streams_mu_);
    const int ranks = std::max(job_ranks, claims_.empty() ? 0 : *claims_.rbegin());
    const int limit = opts_.max_streams + ranks;
    if (open_streams_ + 1 > limit) {
      const std::string beyond = ranks > 0 ? " beyond one per rank of its job's " + std::to_string(ranks) : "";
      throw Overloaded("this data worker already serves " + std::to_string(limit) + " streams (--max-streams " +
                       std::to_string(opts_.max_streams) + beyond + "): close some, or raise the limit");
    }
    ++open_streams_;
    claims_.insert(job_ranks);
  }
  touch();
  return std::unique_ptr<BatchStream>(
      new BatchStream(*this, std::move(on_stall), job_ranks, std::move(job), weight, data));
}

int DataWorker::close_stalled_streams() {
  const Clock::time_point since =
      Clock::now() - seconds(opts_.idle_timeout_s);
  std::lock_guard lock(streams_mu_);
  int closed = 0;
  for (BatchStream* stream : streams_) closed += stream->close_if_stalled(since) ? 1 : 0;
  return closed;
}

void DataWorker::stop() { stopping_ = true; }

int DataWorker::threads() const { return pool_->size(); }

// Shared by the stream and the batches its requests are making on pool threads, which
// may finish after the stream is gone.
struct BatchStream::State {
  explicit State(ByteBudget& b) : budget(b) {}
  ByteBudget& budget;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<ServedBatch> done;          // GUARDED_BY(mu): finished, not yet handed out
  int outstanding = 0;                   // GUARDED_BY(mu): accepted, not yet handed out
  bool reading_done = false;             // GUARDED_BY(mu)
  bool closed = false;                   // GUARDED_BY(mu)
  std::exception_ptr error;              // GUARDED_BY(mu): the first failure
  Clock::time_point last_request = Clock::now();  // GUARDED_BY(mu)
  // GUARDED_BY(mu): when the batch being written was handed out; none between writes.
  std::optional<Clock::time_point> writing_since;
  bool stalled = false;  // GUARDED_BY(mu): closed because the peer took no batch

  void finished(data::Batch batch, uint64_t bytes) {
    ServedBatch served(std::move(batch), budget, bytes);  // gives its bytes back if unused
    {
      std::lock_guard lock(mu);
      if (!closed) done.push_back(std::move(served));
    }
    cv.notify_all();
  }
  void fail(std::exception_ptr e, uint64_t bytes = 0) {
    {
      std::lock_guard lock(mu);
      if (!error) error = std::move(e);
    }
    budget.release(bytes);
    cv.notify_all();
  }
};

BatchStream::BatchStream(DataWorker& worker, std::function<void()> on_stall, int claim, std::string job, double weight,
                         const ServedData& data)
    : worker_(worker), on_stall_(std::move(on_stall)), claim_(claim), job_(std::move(job)), weight_(weight), data_(data),
      state_(std::make_shared<State>(*worker.budget_)) {
  std::lock_guard lock(worker_.streams_mu_);
  worker_.streams_.push_back(this);
}

BatchStream::~BatchStream() {
  {
    std::lock_guard lock(worker_.streams_mu_);
    std::erase(worker_.streams_, this);
    if (const auto it = worker_.claims_.find(claim_); it != worker_.claims_.end()) worker_.claims_.erase(it);
    --worker_.open_streams_;
  }
  close();
  bool stalled = false;
  {
    std::lock_guard lock(state_->mu);
    stalled = state_->stalled;
  }
  // A trainer that leaves gives the worker a fresh idle period; a stalled client
  // does not: it was idle all along.
  if (!stalled) worker_.touch();
}

bool BatchStream::close_if_stalled(Clock::time_point since) {
  std::deque<ServedBatch> unwritten;  // released outside the lock
  {
    std::lock_guard lock(state_->mu);
    State& s = *state_;
    if (s.closed || !s.writing_since || *s.writing_since > since) return false;
    s.stalled = true;
    s.closed = true;
    unwritten.swap(s.done);
  }
  state_->cv.notify_all();
  if (on_stall_) on_stall_();
  return true;
}

void BatchStream::close() {
  std::deque<ServedBatch> unwritten;  // released outside the lock
  {
    std::lock_guard lock(state_->mu);
    state_->closed = true;
    unwritten.swap(state_->done);
  }
  state_->cv.notify_all();
}

bool BatchStream::request(data::BatchRequest request) {
  const DataWorker& w = worker_;
  worker_.touch();
  {
    std::unique_lock lock(state_->mu);
    state_->last_request = Clock::now();
    // A trainer keeps a few requests in flight; one that floods us is slowed down here
    // rather than allowed to fill memory with batches.
    state_->cv.wait(lock, [&] { return state_->outstanding < kWindow || state_->closed || state_->error; });
    if (state_->closed || state_->error) return false;
  }
  const int64_t n = static_cast<int64_t>(request.indices.size());
  const std::string asked = "a request for " + std::to_string(n) + " samples";
  if (n == 0) {
    fail(std::make_exception_ptr(PeerError(asked + ": a request names at least one sample")));
    return false;
  }
  if (n > w.opts_.max_request_samples) {
    fail(std::make_exception_ptr(Overloaded(asked + ": this data worker serves 1 to " +
                                            std::to_string(w.opts_.max_request_samples) +
                                            " per request (--max-request-samples)")));
    return false;
  }
  const uint64_t bytes = static_cast<uint64_t>(n) * data_.bytes_per_sample;
  ByteBudget& budget = *w.budget_;
  if (bytes > budget.capacity()) {
    fail(std::make_exception_ptr(Overloaded(
        asked + " needs " + std::to_string(bytes >> 20) + " MiB, more than this worker's " +
        std::to_string(budget.capacity() >> 20) + " MiB for batches in flight (--max-inflight-mb): ask for smaller "
        "batches")));
    return false;
  }
  // Backpressure: a request waits for room rather than growing the worker's memory.
  const bool admitted = budget.acquire(bytes, [&] {
    std::lock_guard lock(state_->mu);
    return state_->closed || w.stopping_.load();
  });
  if (!admitted) return false;
  {
    std::lock_guard lock(state_->mu);
    if (state_->closed) {  // while it waited: the memory that freed up is not its to use
      budget.release(bytes);
      return false;
    }
    ++state_->outstanding;
  }
  try {
    start(std::move(request), bytes);
  } catch (...) {  // not started (no memory for the batch): its bytes come back at once
    {
      std::lock_guard lock(state_->mu);
      --state_->outstanding;
    }
    state_->fail(std::current_exception(), bytes);
    return false;
  }
  return true;
}

void BatchStream::start(data::BatchRequest request, uint64_t bytes) {
  auto done = [state = state_, bytes](data::Batch batch) { state->finished(std::move(batch), bytes); };
  auto failed = [state = state_, bytes](std::exception_ptr e) { state->fail(std::move(e), bytes); };
  if (worker_.shared_) {
    worker_.shared_->make(job_, weight_, *data_.maker, std::move(request), std::move(done), std::move(failed));
  } else {
    data_.maker->make_async(std::move(request), std::move(done), std::move(failed));
  }
}

void BatchStream::end_requests() {
  {
    std::lock_guard lock(state_->mu);
    state_->reading_done = true;
  }
  state_->cv.notify_all();
}

void BatchStream::fail(std::exception_ptr error) { state_->fail(std::move(error)); }

std::optional<ServedBatch> BatchStream::next(std::chrono::milliseconds wait, bool* done) {
  *done = false;
  std::unique_lock lock(state_->mu);
  State& s = *state_;
  s.cv.wait_for(lock, wait, [&] {
    return !s.done.empty() || s.error || s.stalled || (s.reading_done && s.outstanding == 0);
  });
  if (s.error) std::rethrow_exception(s.error);
  if (s.stalled) {
    throw NetworkError("the trainer took no batch for " +
                       std::to_string(static_cast<int>(worker_.opts_.idle_timeout_s)) +
                       " s (--idle-timeout): closing its stream");
  }
  if (s.done.empty()) {
    if (s.reading_done && s.outstanding == 0) {
      *done = true;
    } else if (s.outstanding == 0 &&
               Clock::now() - s.last_request >
                   std::chrono::duration<double>(worker_.opts_.idle_timeout_s)) {
      throw NetworkError("no request on this stream for " +
                         std::to_string(static_cast<int>(worker_.opts_.idle_timeout_s)) +
                         " s (--idle-timeout): closing it");
    }
    return std::nullopt;
  }
  ServedBatch served = std::move(s.done.front());
  s.done.pop_front();
  --s.outstanding;
  s.writing_since = Clock::now();
  lock.unlock();
  s.cv.notify_all();  // the reader may wait for room
  worker_.touch();
  return served;
}

void BatchStream::written() {
  std::lock_guard lock(state_->mu);
  state_->writing_since.reset();
}

bool BatchStream::wait_reader_done(std::chrono::milliseconds wait) {
  std::unique_lock lock(state_->mu);
  return state_->cv.wait_for(lock, wait, [&] { return state_->reading_done; });
}

}  // namespace tandem::transport
