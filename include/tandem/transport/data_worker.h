// A data worker's logic, without the network: it describes its dataset, and serves
// streams of batch requests within its limits (samples per request, open streams,
// bytes in flight). worker_server.cc is the gRPC adapter around it, as tf.data service
// keeps worker_impl apart from grpc_worker_impl; tests drive this class directly.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tandem/common/clock.h"
#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"
#include "tandem/transport/options.h"
#include "tandem/transport/shared_maker.h"
#include "tandem/transport/worker_info.h"

namespace tandem {
class ThreadPool;
}  // namespace tandem

namespace tandem::data {
class BatchMaker;
}  // namespace tandem::data

namespace tandem::transport {

class ByteBudget;

// A finished batch, holding its bytes of the worker's in-flight allowance until it is
// dropped (after it was written, or with its stream). Move-only.
class ServedBatch {
 public:
  ServedBatch(data::Batch batch, ByteBudget& budget, uint64_t bytes) noexcept
      : batch_(std::move(batch)), budget_(&budget), bytes_(bytes) {}
  ServedBatch(ServedBatch&& o) noexcept;
  ServedBatch& operator=(ServedBatch&&) = delete;
  ~ServedBatch();

  data::Batch& batch() { return batch_; }

 private:
  data::Batch batch_;
  ByteBudget* budget_;
  uint64_t bytes_;
};

class BatchStream;

// A dataset a pool's job asks for by its settings (PoolJob::settings, a JSON object of
// data settings over the pool's own), made by whoever started the pool (launch/worker_role).
struct PoolDataset {
  std::shared_ptr<const data::Dataset> dataset;
  data::DType wire = data::DType::kFloat32;
};
using DatasetFor = std::function<PoolDataset(const std::string& settings)>;

// One dataset a worker serves, and what makes its batches.
struct ServedData {
  std::shared_ptr<const data::Dataset> dataset;
  std::unique_ptr<data::BatchMaker> maker;
  uint64_t bytes_per_sample = 0;  // one sample as sent, with its label
  ServedData(std::shared_ptr<const data::Dataset> d, ThreadPool* pool, data::DType wire, double slowdown);
  ~ServedData();
};

class DataWorker {
 public:

  // `host` names this worker in its description; batches are made as `wire`, on
  // opts.threads threads (0 = every core this process may use).
  // `dataset_for`: a pool's (opts.pool_jobs) datasets of jobs with settings of their own.
  DataWorker(std::shared_ptr<const data::Dataset> dataset, const WorkerOptions& opts, std::string host,
             data::DType wire = data::DType::kFloat32, DatasetFor dataset_for = {});
  ~DataWorker();  // REQUIRES: every stream it opened is gone
  DataWorker(const DataWorker&) = delete;
  DataWorker& operator=(const DataWorker&) = delete;

  // What the Info RPC answers: of the worker's dataset, or of a pool's job's `settings`.
  WorkerInfo describe(const std::string& settings = "");

  // The dataset served for a pool's job's `settings` ("" = the worker's own), made on
  // first use and kept. Throws ConfigError when it cannot be made.
  const ServedData& served(const std::string& settings);

  // Opens one trainer's stream. `job_ranks`: its job's ranks, as the stream says (every
  // caller has passed the job's checks; without a token the server caps what it may say
  // at max_streams()). Throws Overloaded past opts.max_streams open streams plus the most
  // ranks an open stream said: each rank of the job gets its stream, the limit guards
  // against streams beyond those. A claim lasts as long as its stream: a large one lifts
  // the limit only while it is open. `on_stall` is called if
  // close_stalled_streams() closes it (the adapter cancels its call there, which
  // unblocks a write the peer never takes); it must not block.
  // In a pool (opts.pool_jobs), the stream is job `job`'s, of weight `weight`: its
  // requests are shared and fair-shared with the other jobs' (SharedMaker).
  std::unique_ptr<BatchStream> open_stream(std::function<void()> on_stall = {}, int job_ranks = 0,
                                           std::string job = "", double weight = 1, const std::string& settings = "");

  // What the pool did for each job (empty outside a pool).
  std::map<std::string, JobTally> job_tallies() const;

  // Closes every stream whose trainer has not taken the batch being written to it for
  // opts.idle_timeout_s (a client that asks and never reads): its finished batches give
  // their bytes back, its on_stall hook runs, and its end does not count as activity, so
  // the worker's idle clock runs on. Returns how many it closed. Called periodically.
  int close_stalled_streams();

  // Streams ask nothing more of a stopping worker: requests waiting for memory give up
  // and writers stop waiting. Thread-safe.
  void stop();
  bool stopping() const { return stopping_; }

  int open_streams() const { return open_streams_; }
  int max_streams() const { return opts_.max_streams; }
  // The last request taken or batch handed out; a worker nobody asks for anything is idle.
  Clock::time_point last_activity() const { return Clock::time_point{Clock::duration{last_activity_.load()}}; }
  int threads() const;
  const WorkerOptions& options() const { return opts_; }

 private:
  friend class BatchStream;
  void touch() { last_activity_ = Clock::now().time_since_epoch().count(); }

  const WorkerOptions opts_;
  const std::string host_;
  const std::string instance_;  // WorkerInfo::instance
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<ServedData> main_;  // the worker's own dataset
  const DatasetFor dataset_for_;
  std::mutex data_mu_;
  std::map<std::string, std::unique_ptr<ServedData>> others_;  // GUARDED_BY(data_mu_): by a pool's job's settings
  std::unique_ptr<SharedMaker> shared_;  // in a pool only
  std::unique_ptr<ByteBudget> budget_;
  std::atomic<int> open_streams_{0};
  std::mutex streams_mu_;
  std::multiset<int> claims_;  // GUARDED_BY(streams_mu_): the ranks each open stream said
  std::vector<BatchStream*> streams_;  // GUARDED_BY(streams_mu_): the open ones
  std::atomic<bool> stopping_{false};
  std::atomic<Clock::rep> last_activity_{Clock::now().time_since_epoch().count()};
};

// One trainer's stream: requests go in on one thread (the reader), finished batches come
// out in completion order on another (the writer). Requests beyond the stream's window
// or the worker's memory wait: backpressure rather than growth. The first error ends it.
class BatchStream {
 public:
  // Unwritten batches give their bytes back; the worker counts one stream fewer.
  ~BatchStream();
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  // Reader: checks `request` against the worker's limits, waits for room, and starts
  // making it. Returns false when the stream cannot take more: it failed (a request over
  // a limit: Overloaded; an empty one: PeerError; a batch that could not be started;
  // next() throws it), was closed, or the worker stopped while the request waited for
  // memory.
  bool request(data::BatchRequest request);
  // Reader: the trainer will ask for nothing more.
  void end_requests();
  // Reader: reading failed; next() throws `error`.
  void fail(std::exception_ptr error);

  // Writer: waits up to `wait` for the next finished batch. Returns it (call written()
  // once it is written: until then the stream counts as stalled from now); or nullopt with
  // `*done` set once every request was answered after end_requests(); or nullopt when
  // nothing finished in time (the writer checks its own reasons to stop and calls
  // again). Throws the stream's first error, or NetworkError once the stream has had no
  // request for opts.idle_timeout_s with nothing in progress (a silent client must not
  // keep the worker alive).
  std::optional<ServedBatch> next(std::chrono::milliseconds wait, bool* done);

  // Writer: the batch next() returned was written; the trainer is taking its batches.
  void written();

  // Waits up to `wait` for the reader to finish (after an error was reported to the
  // trainer, which then ends its stream). Returns whether it did.
  bool wait_reader_done(std::chrono::milliseconds wait);
  // Unwritten batches give their bytes back, and waiting requests give up.
  void close();

  // Accepted requests not yet written, at most kWindow; more wait in request().
  static constexpr int kWindow = 64;

 private:
  friend class DataWorker;
  // DataWorker::open_stream() makes them; `claim`: the ranks the stream said.
  BatchStream(DataWorker& worker, std::function<void()> on_stall, int claim, std::string job, double weight,
              const ServedData& data);
  // Closes the stream and runs on_stall if a batch handed out before `since` is still
  // being written. Returns whether it did. REQUIRES: worker_.streams_mu_ held.
  bool close_if_stalled(Clock::time_point since);
  // Starts making `request`, whose `bytes` it holds: in a pool through its SharedMaker.
  void start(data::BatchRequest request, uint64_t bytes);

  struct State;
  DataWorker& worker_;
  const std::function<void()> on_stall_;
  const int claim_;
  const std::string job_;  // in a pool
  const double weight_;
  const ServedData& data_;
  std::shared_ptr<State> state_;  // shared with batches still being made
};

}  // namespace tandem::transport
