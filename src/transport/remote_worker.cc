#include "tandem/transport/remote_worker.h"

#include <chrono>
#include <mutex>
#include <optional>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/wire.h"
#include "tandem/v1/data.grpc.pb.h"

namespace tandem::transport {
namespace {

// gRPC deadlines take system_clock time points only.
using Clock = std::chrono::system_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& target, const SecurityOptions& security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Notice a worker host that vanished without closing its connections.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Each RemoteWorker gets its own connection, even to the same address.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!security.tls_server_name.empty()) args.SetSslTargetNameOverride(security.tls_server_name);
  return grpc::CreateCustomChannel(target, channel_credentials(security), args);
}

const char* code_name(grpc::StatusCode code) {
  static const char* const names[] = {"OK",           "CANCELLED",          "UNKNOWN",        "INVALID_ARGUMENT",
                                      "DEADLINE_EXCEEDED", "NOT_FOUND",     "ALREADY_EXISTS", "PERMISSION_DENIED",
                                      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",  "OUT_OF_RANGE",
                                      "UNIMPLEMENTED", "INTERNAL",          "UNAVAILABLE",    "DATA_LOSS",
                                      "UNAUTHENTICATED"};
  const auto i = static_cast<size_t>(code);
  return i < std::size(names) ? names[i] : "UNKNOWN";
}

// A peer's status, with its message made printable: it is the peer's words.
std::string describe(const grpc::Status& status) {
  return std::string("gRPC ") + code_name(status.error_code()) + ": " + printable(status.error_message(), 300);
}

}  // namespace

struct RemoteWorker::Impl {
  SecurityOptions security;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::DataService::Stub> stub;
  std::mutex mu;
  std::unique_ptr<grpc::ClientContext> ctx;  // GUARDED_BY(mu) while streaming
  std::thread reader;
  std::atomic<bool> stopping{false};
  std::atomic<bool> writer_finished{false};

  void stream(feed::Scheduler& scheduler, int id, const std::string& target);
  std::optional<data::DatasetInfo> expect;
};

RemoteWorker::RemoteWorker(std::string target, const SecurityOptions& security)
    : target_(std::move(target)), impl_(std::make_unique<Impl>()) {
  impl_->security = security;
  impl_->channel = make_channel(target_, security);
  impl_->stub = v1::DataService::NewStub(impl_->channel);
}

RemoteWorker::~RemoteWorker() { stop(); }

void RemoteWorker::wait_ready(double timeout_s, const std::atomic<bool>* stop) {
  const auto deadline = after(timeout_s);
  auto health = grpc::health::v1::Health::NewStub(impl_->channel);
  std::string last = "no answer";
  while (Clock::now() < deadline) {
    if (stop && stop->load()) throw Interrupted("stopped while waiting for data worker " + target_);
    impl_->channel->WaitForConnected(std::min(deadline, after(1.0)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::min(deadline, after(2.0)));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    const grpc::Status status = health->Check(&ctx, req, &resp);
    if (status.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) return;
    last = status.ok() ? "health status " + std::to_string(resp.status()) : describe(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw NetworkError("data worker " + target_ + " did not become ready within " +
                     std::to_string(static_cast<int>(timeout_s)) + " s (" + last +
                     "): check that it runs and listens on that port, or raise --connect-timeout");
}

WorkerInfo RemoteWorker::info(double timeout_s) {
  grpc::ClientContext ctx;
  ctx.set_deadline(after(timeout_s));
  authorise(ctx, impl_->security);
  v1::InfoRequest req;
  v1::InfoReply reply;
  const grpc::Status status = impl_->stub->Info(&ctx, req, &reply);
  if (!status.ok()) throw NetworkError("asking data worker " + target_ + " what it serves: " + describe(status));
  WorkerInfo info;
  info.dataset = reply.dataset();
  info.size = reply.size();
  info.fingerprint = reply.fingerprint();
  info.sample_shape.assign(reply.sample_shape().begin(), reply.sample_shape().end());
  info.threads = static_cast<int>(reply.threads());
  info.host = printable(reply.host(), 80);  // the peer's words, logged by the trainer
  for (const auto& s : reply.skipped()) info.skipped.push_back(printable(s));
  info.skipped_count = reply.skipped_count();
  return info;
}

void RemoteWorker::start(feed::Scheduler& scheduler, int source_id, const data::DatasetInfo* expect) {
  if (expect) impl_->expect = *expect;
  {
    std::lock_guard lock(impl_->mu);
    impl_->ctx = std::make_unique<grpc::ClientContext>();
    authorise(*impl_->ctx, impl_->security);
  }
  impl_->reader = std::thread([this, &scheduler, source_id] { impl_->stream(scheduler, source_id, target_); });
}

void RemoteWorker::Impl::stream(feed::Scheduler& scheduler, int id, const std::string& target) {
  // The copy-free reader (batch_codec.h) in place of the generated protobuf stub.
  const grpc::internal::RpcMethod method(kStreamBatchesMethod, grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  std::unique_ptr<grpc::ClientReaderWriter<v1::BatchRequest, IncomingBatch>> rw(
      grpc::internal::ClientReaderWriterFactory<v1::BatchRequest, IncomingBatch>::Create(channel.get(), method,
                                                                                          ctx.get()));
  std::thread writer([&] {
    while (auto request = scheduler.acquire(id)) {
      if (!rw->Write(to_proto(*request))) break;
    }
    writer_finished = true;
    rw->WritesDone();
  });
  IncomingBatch msg;
  std::string bad_batch;
  while (rw->Read(&msg)) {
    try {
      data::Batch batch = from_wire(std::move(msg));
      msg = IncomingBatch();
      if (expect) {
        if (const std::string problem = data::batch_problem(batch, *expect); !problem.empty()) {
          throw NetworkError("sent a malformed batch: " + problem + "; dropping this worker");
        }
      }
      scheduler.complete(id, std::move(batch));
    } catch (const NetworkError& e) {
      bad_batch = "data worker " + target + ": " + e.what();
      ctx->TryCancel();
    }
  }
  const bool writer_was_done = writer_finished;
  // The writer may be parked in acquire(); retiring the source wakes it.
  scheduler.retire(id);
  writer.join();
  const grpc::Status status = rw->Finish();
  if (stopping) return;
  if (!writer_was_done && bad_batch.empty() && status.ok()) {
    scheduler.fail(id, "data worker " + target + " ended its stream early");
    return;
  }
  if (!bad_batch.empty()) {
    spdlog::warn("{}; its requests go to the other sources", bad_batch);
    scheduler.fail(id, bad_batch);
  } else if (!status.ok()) {
    const std::string why = "data worker " + target + " failed: " + describe(status);
    spdlog::warn("{}; its requests go to the other sources", why);
    scheduler.fail(id, why);
  }
}

void RemoteWorker::stop() {
  impl_->stopping = true;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->ctx) impl_->ctx->TryCancel();
  }
  if (impl_->reader.joinable()) impl_->reader.join();
}

bool RemoteWorker::shutdown(const std::string& reason, double timeout_s) {
  grpc::ClientContext ctx;
  ctx.set_deadline(after(timeout_s));
  authorise(ctx, impl_->security);
  v1::ShutdownRequest req;
  req.set_reason(reason);
  v1::ShutdownReply reply;
  const grpc::Status status = impl_->stub->Shutdown(&ctx, req, &reply);
  if (!status.ok()) spdlog::warn("could not tell data worker {} to shut down: {}", target_, describe(status));
  return status.ok();
}

}  // namespace tandem::transport
