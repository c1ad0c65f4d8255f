#include "tandem/common/clock.h"
#include "tandem/transport/worker_server.h"

#include "tandem/transport/grpc_runtime.h"

#include "batch_method.h"
#include "job_streams.h"
#include "listener.h"
#include "status.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/data_worker.h"
#include "tandem/transport/wire.h"
#include "tandem/v1/data.grpc.pb.h"

namespace tandem::transport {
namespace {

constexpr const char* kPortFlags = "--port (or --worker-port, the same on every host)";

}  // namespace

// The gRPC face of a DataWorker: each RPC checks its caller, converts between messages
// and the worker's values, and turns the worker's errors into statuses (status.h).
struct WorkerServer::Impl final : v1::DataService::Service {
  Impl(std::shared_ptr<const data::Dataset> dataset, const WorkerOptions& opts, std::string host, data::DType wire,
       SecurityOptions sec, DatasetFor dataset_for)
      : worker(std::move(dataset), opts, std::move(host), wire, std::move(dataset_for)), security(std::move(sec)),
        job(security.job), pool(opts.pool_jobs.empty() ? nullptr : std::make_unique<PoolJobs>(opts.pool_jobs)) {
    // Every job's dataset now: settings that cannot make one stop the pool at its start.
    if (pool) {
      for (const PoolJob& j : pool->jobs()) worker.served(j.settings);
    }
    MarkMethodStreamed(stream_batches_method().index,
                       copy_free_handler(this, [this](grpc::ServerContext* ctx, ServerBatchStream* stream) {
                         return stream_batches(ctx, stream);
                       }));
  }

  ~Impl() override {
    worker.stop();
    if (listener) listener->stop();
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  // Who may call: the job's token and name, or in a pool, a job by its own token.
  grpc::Status admit(const grpc::ServerContext& ctx, bool claim, PoolCaller& who) {
    if (pool) return check_pool_caller(ctx, security, *pool, who);
    who = {};
    return check_caller(ctx, security, job, claim);
  }

  grpc::Status Info(grpc::ServerContext* ctx, const v1::InfoRequest*, v1::InfoReply* reply) override {
    PoolCaller who;
    if (grpc::Status s = admit(*ctx, false, who); !s.ok()) return refuse(*ctx, "Info", s);
    contacted = true;
    try {
      WorkerInfo info = worker.describe(who.settings);
      if (pool) {
        const auto tallies = worker.job_tallies();
        const auto it = tallies.find(who.job);
        const JobTally t = it == tallies.end() ? JobTally{} : it->second;
        info.pool = WorkerInfo::PoolTally{t.samples_served, t.samples_made, t.samples_shared};
      }
      *reply = to_proto(info);
    } catch (const std::exception& e) {
      return status_for(e, "describing its dataset");
    }
    return grpc::Status::OK;
  }

  grpc::Status Shutdown(grpc::ServerContext* ctx, const v1::ShutdownRequest* req, v1::ShutdownReply*) override {
    PoolCaller who;
    if (grpc::Status s = admit(*ctx, false, who); !s.ok()) return refuse(*ctx, "Shutdown", s);
    if (pool && !who.operator_token) {
      release_job(who.job, req->reason());
      return grpc::Status::OK;
    }
    spdlog::info("shutdown requested by the trainer at {}: {}", printable(peer(*ctx), 80),
                 req->reason().empty() ? "no reason given" : printable(req->reason()));
    finish(StopReason::kShutdownRpc);
    return grpc::Status::OK;
  }

  grpc::Status stream_batches(grpc::ServerContext* ctx, ServerBatchStream* rw) {
    // The first stream of a worker without a job name makes it that stream's job's.
    PoolCaller who;
    if (grpc::Status s = admit(*ctx, true, who); !s.ok()) return refuse(*ctx, "StreamBatches", s);
    contacted = true;
    std::unique_ptr<BatchStream> stream;
    try {
      // What a caller without the job's token says of its job counts only up to
      // --max-streams more streams: anyone could say 65,536.
      const int claimed = job_ranks_of(*ctx);
      const int ranks = security.token.empty() ? std::min(claimed, worker.max_streams()) : claimed;
      stream = worker.open_stream([this, ctx] { close_stalled(*ctx); }, ranks, who.job, who.weight, who.settings);
    } catch (const std::exception& e) {
      return refuse(*ctx, "StreamBatches", status_for(e, "opening a stream"));
    }
    const JobStreams::Held held(job_streams, who.job, ctx, [this](const std::string& j) { say_job(j); });
    std::thread reader([&] { read_requests(rw, *stream); });
    grpc::Status status;
    bool reader_done = false;
    try {
      status = write_batches(ctx, rw, *stream);
      if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT || status.error_code() == grpc::StatusCode::DATA_LOSS ||
          status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        // Tell the trainer in-band (a cancelled call would lose the message), then give
        // it a few seconds to end the stream; once it has, the status reaches it too.
        spdlog::warn("refusing a request: {}", status.error_message());
        rw->Write(error_batch(status.error_message(), status.error_code() == grpc::StatusCode::DATA_LOSS));
        reader_done = stream->wait_reader_done(std::chrono::seconds(10));
      }
    } catch (const std::exception& e) {  // whatever happens, the reader is joined
      status = status_for(e, "serving batches");
    }
    // Cancelling unblocks the reader's Read (the peer then sees CANCELLED); closing, its
    // wait for room.
    if (!status.ok() && !reader_done) ctx->TryCancel();
    stream->close();
    reader.join();
    return status;
  }

  // A pool's job released its workers: only its own streams end; the pool serves on.
  void release_job(const std::string& name, const std::string& reason) {
    const size_t n = job_streams.cancel(name);
    spdlog::info("job '{}' released the pool ({}): its {} open stream(s) end; the pool serves on", printable(name, 80),
                 reason.empty() ? "no reason given" : printable(reason), n);
  }

  // What the pool did for a job whose streams have all ended.
  void say_job(const std::string& name) {
    const auto tallies = worker.job_tallies();
    const auto it = tallies.find(name);
    if (it == tallies.end()) return;
    const JobTally& t = it->second;
    spdlog::info("job '{}': {} batches, {} samples served ({} made for it, {} shared from identical requests), {:.1f} "
                 "CPU-s, weight {}", printable(name, 80), t.batches, t.samples_served, t.samples_made,
                 t.samples_shared, t.compute_seconds, t.weight);
  }

  // Who called: its address, also for a connection the worker accepted itself.
  std::string peer(const grpc::ServerContext& ctx) const {
    return listener ? listener->address_of(ctx.peer()) : ctx.peer();
  }

  // A client that asks and never reads: its stream is closed (DataWorker::close_stalled_streams).
  void close_stalled(grpc::ServerContext& ctx) {
    spdlog::warn("closing the stream of {}: it took no batch for {} s (--idle-timeout)", printable(peer(ctx), 80),
                 static_cast<int>(worker.options().idle_timeout_s));
    ctx.TryCancel();  // a Write the peer never takes returns
  }

  static void read_requests(ServerBatchStream* rw, BatchStream& stream) {
    try {
      grpc::ByteBuffer raw;
      while (rw->Read(&raw)) {
        if (!stream.request(from_proto(parse_request(raw)))) break;
      }
    } catch (...) {
      stream.fail(std::current_exception());
    }
    stream.end_requests();
  }

  grpc::Status write_batches(grpc::ServerContext* ctx, ServerBatchStream* rw, BatchStream& stream) {
    bool told = false;  // that this worker is leaving (drain)
    try {
      for (;;) {
        if (!told && leaving.load()) {
          std::string why;
          {
            std::lock_guard lock(mu);
            why = leaving_why;
          }
          if (!rw->Write(leaving_notice(why))) return {grpc::StatusCode::CANCELLED, "trainer went away"};
          told = true;
        }
        bool done = false;
        // Wakes periodically to notice a cancelled call or a stopping worker.
        std::optional<ServedBatch> served = stream.next(std::chrono::milliseconds(200), &done);
        if (done) return grpc::Status::OK;
        if (!served) {
          if (ctx->IsCancelled() || worker.stopping()) return {grpc::StatusCode::CANCELLED, "worker stopping"};
          continue;
        }
        // The batch's bytes stay reserved until it is written: `served` ends after Write.
        const auto samples = static_cast<uint64_t>(served->batch().size());
        if (!rw->Write(to_wire(std::move(served->batch())))) return {grpc::StatusCode::CANCELLED, "trainer went away"};
        stream.written();
        ++batches_served;
        samples_served += samples;
      }
    } catch (const std::exception& e) {
      return status_for(e, "serving batches");
    }
  }

  // Refused calls are logged (rate-limited) with the caller's address: an operator should
  // see a stranger knocking, but a stranger must not be able to flood the log.
  grpc::Status refuse(const grpc::ServerContext& ctx, const char* rpc, const grpc::Status& why) {
    const auto now = Clock::now().time_since_epoch().count();
    if (now - last_refusal_log.load() > std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(10)).count()) {
      last_refusal_log = now;
      spdlog::warn("refused {} from {}: {}", rpc, printable(peer(ctx), 80), why.error_message());
    }
    return why;
  }

  void finish(StopReason why) {
    {
      std::lock_guard lock(mu);
      if (!reason) reason = why;
    }
    cv.notify_all();
  }

  DataWorker worker;
  SecurityOptions security;
  WorkerJob job;  // security.job, or the first streaming trainer's
  std::unique_ptr<PoolJobs> pool;  // --pool-jobs: jobs by their own tokens
  JobStreams job_streams;          // a pool's open streams by job
  std::unique_ptr<grpc::Server> server;
  // Plain connections the worker accepted itself (listener.h), and what gRPC takes them with.
  std::unique_ptr<Listener> listener;
  std::unique_ptr<grpc_server_credentials, void (*)(grpc_server_credentials*)> plain{
      grpc_insecure_server_credentials_create(), grpc_server_credentials_release};
  std::atomic<Clock::rep> last_refusal_log{0};
  std::atomic<Clock::rep> stop_deadline{0};  // set by stop_when_idle; 0 = none
  std::atomic<bool> contacted{false};  // a trainer of its job has called (Info or a stream)
  Clock::time_point started = Clock::now();
  std::mutex mu;
  std::condition_variable cv;
  std::optional<StopReason> reason;  // GUARDED_BY(mu)
  std::atomic<bool> leaving{false};  // drain(): every stream is told
  std::atomic<uint64_t> batches_served{0}, samples_served{0};
  std::string leaving_why;           // GUARDED_BY(mu)
};

WorkerServer::WorkerServer(std::shared_ptr<const data::Dataset> dataset, const WorkerOptions& opts,
                           std::string host, data::DType wire, SecurityOptions security, DatasetFor dataset_for)
    : impl_(std::make_unique<Impl>(std::move(dataset), opts, std::move(host), wire, std::move(security),
                                   std::move(dataset_for))) {}

WorkerServer::~WorkerServer() = default;

int WorkerServer::threads() const { return impl_->worker.threads(); }

WorkerServer::Stats WorkerServer::stats() const {
  return {impl_->worker.open_streams(), impl_->worker.threads(), impl_->batches_served.load(),
          impl_->samples_served.load(), impl_->leaving.load(), impl_->worker.job_tallies()};
}

int WorkerServer::start(const std::string& address) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  // Without TLS the worker accepts its connections itself (listener.h); gRPC takes
  // descriptors only for plain connections, so with TLS it listens as before.
  const bool own_listener = impl_->security.tls_cert.empty() && impl_->security.tls_key.empty();
  if (own_listener) {
    const int most = impl_->worker.options().max_connections;
    impl_->listener = Listener::open(address, {most > 0 ? most : default_max_connections()});
    if (!impl_->listener) throw ConfigError(bind_failure(address, kPortFlags));
    port = impl_->listener->port();
  } else {
    builder.AddListeningPort(address, server_credentials(impl_->security), &port);
  }
  builder.RegisterService(impl_.get());
  // Batches of any size up to 1 GiB and beyond: no 4 MiB surprises.
  // Requests are small: a cap keeps a giant one from being parsed at all.
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(
      int64_t{64} << 20, std::max<int64_t>(int64_t{1} << 20, int64_t{16} * impl_->worker.options().max_request_samples))));
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
    // A configuration mistake (exit 3), not a peer's failure: rerunning cannot help.
    throw ConfigError(bind_failure(address, kPortFlags));
  }
  if (own_listener) {
    impl_->listener->start([server = impl_->server->c_server(), creds = impl_->plain.get()](int fd) {
      grpc_server_add_channel_from_fd(server, fd, creds);
    });
  }
  const std::string bound = address.substr(0, address.rfind(':') + 1) + std::to_string(port);
  if (impl_->pool) {
    spdlog::info("a pool for {} job(s) (--pool-jobs {}): each admitted by its own token, its streams apart; the "
                 "cores shared by weight, identical requests made once within {} MiB",
                 impl_->pool->size(), impl_->worker.options().pool_jobs, impl_->worker.options().share_window_mb);
  } else if (impl_->security.token.empty() && !is_loopback(address)) {
    spdlog::warn("THE DATA PLANE IS OPEN: no token is set, so anyone who reaches {} can read batches, send its "
                 "own or stop this worker. Set TANDEM_TOKEN (or --token-file) on every host of the job, or keep "
                 "the network private (docs/security.md)",
                 bound);
  }
  if (impl_->security.job.empty() && !impl_->pool) {
    spdlog::warn("this data worker has no job name (--job-name, TRAINING_JOB_NAME or SLURM_JOB_ID): it will belong "
                 "to the first job that opens a stream to it, and refuse the others");
  }
  return port;
}

StopReason WorkerServer::wait() {
  const DataWorker& worker = impl_->worker;
  const auto idle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(worker.options().idle_timeout_s));
  const auto claim = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(worker.options().claim_timeout_s));
  StopReason why;
  {
    std::unique_lock lock(impl_->mu);
    for (;;) {
      if (impl_->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return impl_->reason.has_value(); })) break;
      impl_->worker.close_stalled_streams();
      if (impl_->pool) {  // a pool outlives its jobs: only Shutdown with its own token or a signal ends it
      } else if (worker.open_streams() == 0 && Clock::now() - worker.last_activity() > idle) {
        impl_->reason = StopReason::kIdle;
        break;
      }
      if (!impl_->pool && !impl_->contacted && worker.options().claim_timeout_s > 0 &&
          Clock::now() - impl_->started > claim) {
        impl_->reason = StopReason::kUnclaimed;
        break;
      }
      if (const auto d = impl_->stop_deadline.load(); d != 0) {
        if (worker.open_streams() == 0 || Clock::now().time_since_epoch().count() > d) {
          impl_->reason = StopReason::kStopped;
          break;
        }
      }
    }
    why = *impl_->reason;
  }
  impl_->worker.stop();
  if (impl_->listener) impl_->listener->stop();  // no connection is handed to a server shutting down
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return why;
}

void WorkerServer::stop() { impl_->finish(StopReason::kStopped); }

void WorkerServer::drain(double grace_s, const std::string& why) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->leaving_why = why;
  }
  impl_->leaving = true;
  stop_when_idle(grace_s);
}

void WorkerServer::stop_when_idle(double grace_s) {
  const auto deadline = after(grace_s);
  impl_->stop_deadline = deadline.time_since_epoch().count();
  impl_->cv.notify_all();
}

}  // namespace tandem::transport
