#include "tandem/transport/worker_server.h"

#include "status.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/transport/byte_budget.h"
#include "tandem/transport/credentials.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/batching/thread_pool.h"
#include "tandem/transport/wire.h"
#include "tandem/v1/data.grpc.pb.h"

namespace tandem::transport {
namespace {

using Clock = std::chrono::steady_clock;
using BatchStream = grpc::ServerReaderWriter<OutgoingBatch, v1::BatchRequest>;
constexpr int kMaxOutstanding = 64;  // accepted but unwritten requests per stream

// One open StreamBatches call: batches finish on pool threads and queue here until the
// handler thread writes them. Every accepted request holds its bytes of the worker's
// budget until its batch is written, or dropped with the stream.
struct StreamState {
  explicit StreamState(ByteBudget& b) : budget(b) {}
  ByteBudget& budget;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<data::Batch, uint64_t>> done;  // GUARDED_BY(mu): batch, its reserved bytes
  int outstanding = 0;           // GUARDED_BY(mu): accepted, not yet written
  bool reading_done = false;     // GUARDED_BY(mu)
  grpc::Status error;            // GUARDED_BY(mu): the first request that cannot be served
  bool closed = false;           // GUARDED_BY(mu): the handler is done writing
  std::chrono::steady_clock::time_point last_request = std::chrono::steady_clock::now();  // GUARDED_BY(mu)

  void push(data::Batch batch, uint64_t bytes) {
    {
      std::lock_guard lock(mu);
      if (!closed) {
        done.emplace_back(std::move(batch), bytes);
        bytes = 0;
      }
    }
    budget.release(bytes);
    cv.notify_all();
  }
  void fail(grpc::StatusCode code, const std::string& why, uint64_t bytes = 0) {
    {
      std::lock_guard lock(mu);
      if (error.ok()) error = grpc::Status(code, why);
    }
    budget.release(bytes);
    cv.notify_all();
  }
  // The handler is done: batches not yet written give their bytes back.
  void close() {
    uint64_t freed = 0;
    {
      std::lock_guard lock(mu);
      closed = true;
      for (const auto& d : done) freed += d.second;
      done.clear();
    }
    budget.release(freed);
    cv.notify_all();
  }
};

}  // namespace

struct WorkerServer::Impl final : v1::DataService::Service {
  Impl(std::shared_ptr<const data::Dataset> ds, const WorkerOptions& o, std::string h, data::DType wire,
       SecurityOptions sec)
      : dataset(std::move(ds)), opts(o), host(std::move(h)), security(std::move(sec)),
        pool(std::make_unique<data::ThreadPool>(o.threads > 0 ? o.threads : data::available_cores())),
        maker(std::make_unique<data::BatchMaker>(dataset, pool.get(), wire)),
        bytes_per_sample(dataset->info().sample_bytes() / data::dtype_size(dataset->info().dtype) *
                             data::dtype_size(wire) + sizeof(int64_t)),
        budget(o.max_inflight_mb > 0 ? static_cast<uint64_t>(o.max_inflight_mb) << 20 : default_inflight_bytes()) {
    maker->set_slowdown(o.emulate_slowdown);
    // StreamBatches sends copy-free OutgoingBatch messages instead of the generated
    // protobuf type; same method, same bytes on the wire.
    MarkMethodStreamed(kStreamBatchesIndex,
                       new grpc::internal::BidiStreamingHandler<Impl, v1::BatchRequest, OutgoingBatch>(
                           [](Impl* self, grpc::ServerContext* ctx, BatchStream* stream) {
                             return self->stream_batches(ctx, stream);
                           },
                           this));
  }

  ~Impl() override {
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    pool.reset();  // drains callbacks that still refer to maker
  }

  grpc::Status Info(grpc::ServerContext* ctx, const v1::InfoRequest*, v1::InfoReply* reply) override {
    if (grpc::Status s = check_caller(*ctx, security); !s.ok()) return refuse(*ctx, "Info", s);
    try {
      fill_info(reply);
    } catch (const std::exception& e) {
      return status_for(e, "describing its dataset");
    }
    return grpc::Status::OK;
  }

  void fill_info(v1::InfoReply* reply) {
    const data::DatasetInfo& info = dataset->info();
    reply->set_dataset(info.name);
    reply->set_size(info.size);
    reply->set_fingerprint(info.fingerprint);
    reply->mutable_sample_shape()->Add(info.sample_shape.begin(), info.sample_shape.end());
    reply->set_dtype(to_proto(info.dtype));
    reply->set_num_classes(static_cast<uint32_t>(info.num_classes));
    reply->mutable_mean()->Add(info.mean.begin(), info.mean.end());
    reply->mutable_std()->Add(info.std.begin(), info.std.end());
    reply->set_threads(static_cast<uint32_t>(pool->size()));
    reply->set_host(host);
    for (const std::string& s : dataset->skipped()) reply->add_skipped(s);
    reply->set_skipped_count(dataset->skipped_count());
  }

  grpc::Status Shutdown(grpc::ServerContext* ctx, const v1::ShutdownRequest* req, v1::ShutdownReply*) override {
    if (grpc::Status s = check_caller(*ctx, security); !s.ok()) return refuse(*ctx, "Shutdown", s);
    spdlog::info("shutdown requested by the trainer at {}: {}", printable(ctx->peer(), 80),
                 req->reason().empty() ? "no reason given" : printable(req->reason()));
    finish(StopReason::kShutdownRpc);
    return grpc::Status::OK;
  }

  grpc::Status stream_batches(grpc::ServerContext* ctx, BatchStream* stream) {
    if (grpc::Status s = check_caller(*ctx, security); !s.ok()) return refuse(*ctx, "StreamBatches", s);
    if (++open_streams > opts.max_streams) {
      --open_streams;
      return refuse(*ctx, "StreamBatches",
                    {grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "this data worker already serves " + std::to_string(opts.max_streams) +
                         " streams (--max-streams): close some, or raise the limit"});
    }
    touch();
    auto state = std::make_shared<StreamState>(budget);
    grpc::Status status;
    std::thread reader;
    try {
      reader = std::thread([this, ctx, stream, state] { read_requests(ctx, stream, state); });
      status = write_batches(ctx, stream, *state);
      if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
          status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        report_error(ctx, stream, *state, status);
      }
    } catch (const std::exception& e) {
      status = status_for(e, "serving a stream");
    }
    if (!status.ok()) ctx->TryCancel();  // unblocks the reader's Read
    state->close();
    if (reader.joinable()) reader.join();
    --open_streams;
    touch();
    return status;
  }

  // Checks a request against the worker's limits and reserves its bytes. Returns its
  // reserved bytes, or nullopt after failing the stream (or when the stream closed).
  std::optional<uint64_t> admit(const v1::BatchRequest& msg, StreamState& state) {
    const int64_t n = msg.indices_size();
    if (n == 0 || n > opts.max_request_samples) {
      state.fail(n == 0 ? grpc::StatusCode::INVALID_ARGUMENT : grpc::StatusCode::RESOURCE_EXHAUSTED,
                 "a request for " + std::to_string(n) + " samples: this data worker serves 1 to " +
                     std::to_string(opts.max_request_samples) + " per request (--max-request-samples)");
      return std::nullopt;
    }
    const uint64_t bytes = static_cast<uint64_t>(n) * bytes_per_sample;
    if (bytes > budget.capacity()) {
      state.fail(grpc::StatusCode::RESOURCE_EXHAUSTED,
                 "a request for " + std::to_string(n) + " samples needs " + std::to_string(bytes >> 20) +
                     " MiB, more than this worker's " + std::to_string(budget.capacity() >> 20) +
                     " MiB for batches in flight (--max-inflight-mb): ask for smaller batches");
      return std::nullopt;
    }
    // Backpressure: a request waits for room rather than growing the worker's memory.
    const bool admitted = budget.acquire(bytes, [&] {
      std::lock_guard lock(state.mu);
      return state.closed || stopping.load();
    });
    if (!admitted) return std::nullopt;
    return bytes;
  }

  void read_requests(grpc::ServerContext* ctx, BatchStream* stream, const std::shared_ptr<StreamState>& state) {
    try {
      v1::BatchRequest msg;
      while (stream->Read(&msg)) {
        touch();
        {
          // A trainer keeps a few requests in flight; one that floods us is slowed down
          // here rather than allowed to fill memory with batches.
          std::unique_lock lock(state->mu);
          state->last_request = Clock::now();
          state->cv.wait(lock, [&] { return state->outstanding < kMaxOutstanding || state->closed; });
          if (state->closed) break;
        }
        const std::optional<uint64_t> bytes = admit(msg, *state);
        if (!bytes) break;
        {
          std::lock_guard lock(state->mu);
          ++state->outstanding;
        }
        maker->make_async(
            from_proto(msg), [state, b = *bytes](data::Batch batch) { state->push(std::move(batch), b); },
            [state, b = *bytes](std::exception_ptr e) {
              try {
                std::rethrow_exception(e);
              } catch (const std::exception& ex) {
                const grpc::Status s = status_for(ex, "making a batch");
                state->fail(s.error_code(), s.error_message(), b);
              }
            });
      }
    } catch (const std::exception& e) {
      const grpc::Status s = status_for(e, "reading a request");
      state->fail(s.error_code(), s.error_message());
    }
    (void)ctx;
    { std::lock_guard lock(state->mu); state->reading_done = true; }
    state->cv.notify_all();
  }

  grpc::Status write_batches(grpc::ServerContext* ctx,
                             BatchStream* stream,
                             StreamState& state) {
    for (;;) {
      std::unique_lock lock(state.mu);
      // Wake periodically to notice a cancelled call or a stopping server.
      state.cv.wait_for(lock, std::chrono::milliseconds(200), [&] {
        return !state.done.empty() || !state.error.ok() || (state.reading_done && state.outstanding == 0);
      });
      if (!state.error.ok()) return state.error;
      if (state.done.empty()) {
        if (state.reading_done && state.outstanding == 0) return grpc::Status::OK;
        if (ctx->IsCancelled() || stopping) return {grpc::StatusCode::CANCELLED, "worker stopping"};
        // A stream that asks for nothing keeps no worker alive: a silent client, or a
        // trainer that stopped, would otherwise hold it (and its host's bill) forever.
        if (state.outstanding == 0 && Clock::now() - state.last_request > idle_limit()) {
          return {grpc::StatusCode::DEADLINE_EXCEEDED,
                  "no request on this stream for " + std::to_string(static_cast<int>(opts.idle_timeout_s)) +
                      " s (--idle-timeout): closing it"};
        }
        continue;
      }
      auto [batch, bytes] = std::move(state.done.front());
      state.done.pop_front();
      --state.outstanding;
      lock.unlock();
      state.cv.notify_all();  // the reader may wait for room
      const bool written = stream->Write(to_wire(std::move(batch)));
      budget.release(bytes);
      if (!written) return {grpc::StatusCode::CANCELLED, "trainer went away"};
      touch();
    }
  }

  // Tells the trainer in-band (a cancelled call would lose the message), then gives it
  // a few seconds to end the stream.
  void report_error(grpc::ServerContext* ctx, BatchStream* stream,
                    StreamState& state, const grpc::Status& status) {
    spdlog::warn("refusing a request: {}", status.error_message());
    stream->Write(error_batch(status.error_message()));
    std::unique_lock lock(state.mu);
    state.cv.wait_for(lock, std::chrono::seconds(10), [&] { return state.reading_done || ctx->IsCancelled(); });
  }

  // Refused calls are logged (rate-limited) with the caller's address: an operator should
  // see a stranger knocking, but a stranger must not be able to flood the log.
  grpc::Status refuse(const grpc::ServerContext& ctx, const char* rpc, const grpc::Status& why) {
    const auto now = Clock::now().time_since_epoch().count();
    if (now - last_refusal_log.load() > std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(10)).count()) {
      last_refusal_log = now;
      spdlog::warn("refused {} from {}: {}", rpc, printable(ctx.peer(), 80), why.error_message());
    }
    return why;
  }

  void touch() { last_activity = Clock::now().time_since_epoch().count(); }

  Clock::duration idle_limit() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.idle_timeout_s));
  }

  void finish(StopReason why) {
    {
      std::lock_guard lock(mu);
      if (!reason) reason = why;
    }
    cv.notify_all();
  }

  std::shared_ptr<const data::Dataset> dataset;
  WorkerOptions opts;
  std::string host;
  SecurityOptions security;
  std::unique_ptr<data::ThreadPool> pool;
  std::unique_ptr<data::BatchMaker> maker;
  uint64_t bytes_per_sample = 0;  // one sample on the wire, with its label
  ByteBudget budget;
  std::unique_ptr<grpc::Server> server;
  std::atomic<Clock::rep> last_activity{Clock::now().time_since_epoch().count()};
  std::atomic<Clock::rep> last_refusal_log{0};
  std::atomic<Clock::rep> stop_deadline{0};  // set by stop_when_idle; 0 = none
  std::atomic<int> open_streams{0};
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable cv;
  std::optional<StopReason> reason;  // GUARDED_BY(mu)
};

WorkerServer::WorkerServer(std::shared_ptr<const data::Dataset> dataset, const WorkerOptions& opts,
                           std::string host, data::DType wire, SecurityOptions security)
    : impl_(std::make_unique<Impl>(std::move(dataset), opts, std::move(host), wire, std::move(security))) {}

WorkerServer::~WorkerServer() = default;

int WorkerServer::threads() const { return impl_->pool->size(); }

int WorkerServer::start(const std::string& address) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, server_credentials(impl_->security), &port);
  builder.RegisterService(impl_.get());
  // Batches of any size up to 1 GiB and beyond: no 4 MiB surprises.
  // Requests are small: a cap keeps a giant one from being parsed at all.
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(
      int64_t{64} << 20, std::max<int64_t>(int64_t{1} << 20, int64_t{16} * impl_->opts.max_request_samples))));
  builder.SetMaxSendMessageSize(-1);
  // Trainers ping every 10 s to notice a dead worker; accept those pings.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // And the worker pings its trainers: one that is stopped (SIGSTOP) or cut off answers
  // no ping, its connection is closed and a Write blocked on it returns.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 15000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Without this gRPC sets SO_REUSEPORT and a second worker on the same port "succeeds".
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port == 0) {
    throw NetworkError("cannot listen on " + address +
                       ": is another process using the port? Choose another with --port");
  }
  impl_->touch();
  if (impl_->security.token.empty() && !is_loopback(address)) {
    spdlog::warn("THE DATA PLANE IS OPEN: no token is set, so anyone who reaches {} can read batches, send its "
                 "own or stop this worker. Set TANDEM_TOKEN (or --token-file) on every host of the job, or keep "
                 "the network private (docs/security.md)",
                 address);
  }
  return port;
}

StopReason WorkerServer::wait() {
  const auto idle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(impl_->opts.idle_timeout_s));
  StopReason why;
  {
    std::unique_lock lock(impl_->mu);
    for (;;) {
      if (impl_->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return impl_->reason.has_value(); })) break;
      const Clock::time_point last{Clock::duration{impl_->last_activity.load()}};
      if (impl_->open_streams == 0 && Clock::now() - last > idle) {
        impl_->reason = StopReason::kIdle;
        break;
      }
      if (const auto d = impl_->stop_deadline.load(); d != 0) {
        if (impl_->open_streams == 0 || Clock::now().time_since_epoch().count() > d) {
          impl_->reason = StopReason::kStopped;
          break;
        }
      }
    }
    why = *impl_->reason;
  }
  impl_->stopping = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return why;
}

void WorkerServer::stop() { impl_->finish(StopReason::kStopped); }

void WorkerServer::stop_when_idle(double grace_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s));
  impl_->stop_deadline = deadline.time_since_epoch().count();
  impl_->cv.notify_all();
}

}  // namespace tandem::transport
