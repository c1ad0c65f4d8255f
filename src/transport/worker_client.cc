#include "tandem/transport/worker_client.h"

#include "batch_method.h"

#include <atomic>
#include <chrono>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/wire.h"
#include "tandem/v1/data.grpc.pb.h"

namespace tandem::transport {
namespace {

// gRPC deadlines take system_clock time points only.
std::chrono::system_clock::time_point deadline_after(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(seconds));
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& target, const SecurityOptions& security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Notice a worker host that vanished without closing its connections.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect as the feed's own retries expect (worker_link.h): gRPC's defaults (pauses
  // growing to 120 s, 20 s per connection attempt) would let a worker whose network has
  // healed wait a minute or more for its channel's next attempt.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // Each client gets its own connection, even to the same address.
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

// Failures a retry can cure: the worker restarted, the network glitched, it was busy.
bool transient(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
      return true;
    default:
      return false;  // wrong token or job, a request it cannot serve: the same again
  }
}

CallStatus status_of(const grpc::Status& s) {
  if (s.ok()) return {};
  return {transient(s) ? CallStatus::Kind::kTransient : CallStatus::Kind::kFinal, describe(s)};
}

class GrpcBatchCall : public BatchCall {
 public:
  GrpcBatchCall(grpc::Channel& channel, const SecurityOptions& security, int job_ranks) {
    authorise(ctx_, security);
    add_job_ranks(ctx_, job_ranks);
    // The copy-free reader (batch_method.h) in place of the generated protobuf stub.
    rw_ = open_copy_free(channel, ctx_);
  }
  bool write(const data::BatchRequest& request) override { return rw_->Write(to_proto(request)); }
  void writes_done() override { rw_->WritesDone(); }
  std::optional<data::Batch> read() override {
    for (;;) {
      IncomingBatch msg;
      if (!rw_->Read(&msg)) return std::nullopt;
      if (msg.header.leaving().empty()) return from_wire(std::move(msg));
      leaving(printable(msg.header.leaving(), 200));  // a notice, not a batch: read on
    }
  }
  void cancel() override { ctx_.TryCancel(); }
  CallStatus finish() override { return status_of(rw_->Finish()); }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<ClientBatchStream> rw_;
};

class GrpcWorkerClient : public WorkerClient {
 public:
  GrpcWorkerClient(std::string target, const SecurityOptions& security)
      : target_(std::move(target)),
        security_(security),
        channel_(make_channel(target_, security)),
        stub_(v1::DataService::NewStub(channel_)),
        health_(grpc::health::v1::Health::NewStub(channel_)) {}

  const std::string& target() const override { return target_; }

  bool healthy(double timeout_s, std::string* why) override {
    const auto deadline = deadline_after(timeout_s);
    // Each check is a fresh try: gRPC's own reconnect pause (grown while the worker was
    // unreachable) would otherwise hold the connection back past the network's heal.
    grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
    // Waiting for the connection first lets a worker that is still starting answer
    // within the same call instead of failing it at once.
    channel_->WaitForConnected(deadline);
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    const grpc::Status status = health_->Check(&ctx, req, &resp);
    if (status.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) return true;
    if (why) *why = status.ok() ? "health status " + std::to_string(resp.status()) : describe(status);
    return false;
  }

  WorkerInfo info(double timeout_s) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_after(timeout_s));
    authorise(ctx, security_);
    v1::InfoRequest req;
    v1::InfoReply reply;
    const grpc::Status status = stub_->Info(&ctx, req, &reply);
    if (!status.ok()) throw NetworkError("asking data worker " + target_ + " what it serves: " + describe(status));
    try {
      return from_proto(reply);
    } catch (const PeerError& e) {
      throw PeerError(with_context("data worker " + target_, e));
    }
  }

  CallStatus shutdown(const std::string& reason, double timeout_s) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_after(timeout_s));
    authorise(ctx, security_);
    v1::ShutdownRequest req;
    req.set_reason(reason);
    v1::ShutdownReply reply;
    return status_of(stub_->Shutdown(&ctx, req, &reply));
  }

  std::unique_ptr<BatchCall> stream() override {
    return std::make_unique<GrpcBatchCall>(*channel_, security_, job_ranks());
  }

 private:
  std::string target_;
  SecurityOptions security_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DataService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace

std::unique_ptr<WorkerClient> make_worker_client(const std::string& target, const SecurityOptions& security) {
  return std::make_unique<GrpcWorkerClient>(target, security);
}

}  // namespace tandem::transport
