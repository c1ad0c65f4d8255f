#include "tandem/transport/worker_client.h"

#include "batch_method.h"
#include "channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <tuple>

#include <spdlog/spdlog.h>

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

class GrpcBatchCall : public BatchCall {
 public:
  // `upstream`: the worker this stream is for when `channel` is a host's stream relay.
  GrpcBatchCall(grpc::Channel& channel, const SecurityOptions& security, int job_ranks, const std::string& upstream) {
    authorise(ctx_, security);
    add_job_ranks(ctx_, job_ranks);
    if (!upstream.empty()) add_upstream(ctx_, upstream);
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

// "name:port" -> {name, ":port"}; a numeric host (or a bracketed IPv6 one): {"", ""}.
std::pair<std::string, std::string> name_of(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (target.empty() || target.front() == '[' || colon == std::string::npos) return {};
  const std::string host = target.substr(0, colon);
  unsigned char buf[sizeof(in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1) return {};
  return {host, target.substr(colon)};
}

class GrpcWorkerClient : public WorkerClient {
 public:
  GrpcWorkerClient(std::string target, const SecurityOptions& security, const std::string& relay,
                   NameResolver resolve)
      : target_(std::move(target)),
        security_(security),
        relay_(relay.empty() ? nullptr : make_relay_channel(relay)) {
    std::tie(name_, port_) = name_of(target_);
    if (!name_.empty() && resolve) {
      resolve_ = std::move(resolve);
      // TLS still checks the worker's certificate against its name, not the address dialled.
      if (!security_.tls_ca.empty() && security_.tls_server_name.empty()) security_.tls_server_name = name_;
    } else {
      connect(target_);
    }
  }

  const std::string& target() const override { return target_; }

  bool healthy(double timeout_s, std::string* why) override {
    if (!redial(timeout_s, why)) return false;
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
    std::string why;
    if (!channel_ && !redial(timeout_s, &why)) throw NetworkError("data worker " + target_ + ": " + why);
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
    std::string why;
    if (!channel_ && !redial(timeout_s, &why)) return {CallStatus::Kind::kTransient, why};
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_after(timeout_s));
    authorise(ctx, security_);
    v1::ShutdownRequest req;
    req.set_reason(reason);
    v1::ShutdownReply reply;
    return status_of(stub_->Shutdown(&ctx, req, &reply));
  }

  std::unique_ptr<BatchCall> stream() override {
    if (relay_) return std::make_unique<GrpcBatchCall>(*relay_, security_, job_ranks(), target_);
    if (!channel_ && !redial(2, nullptr)) connect(target_);  // let gRPC try the name itself
    return std::make_unique<GrpcBatchCall>(*channel_, security_, job_ranks(), "");
  }

 private:
  void connect(const std::string& dial) {
    channel_ = make_worker_channel(dial, security_);
    stub_ = v1::DataService::NewStub(channel_);
    health_ = grpc::health::v1::Health::NewStub(channel_);
  }

  // Looks the name up again (a client made with a resolver) and dials its first address
  // when it moved. False, saying why, when the name does not resolve now.
  bool redial(double timeout_s, std::string* why) {
    if (!resolve_) return true;
    std::vector<std::string> addresses;
    try {
      addresses = resolve_(name_, std::min(timeout_s, 2.0));
    } catch (const std::exception& e) {
      if (why) *why = e.what();
      return false;
    }
    if (addresses.empty() || addresses.front() == address_) return !address_.empty();
    if (!address_.empty()) spdlog::info("data worker {} is now at {}: dialling it there", target_, addresses.front());
    address_ = addresses.front();
    connect((address_.find(':') != std::string::npos ? "[" + address_ + "]" : address_) + port_);
    return true;
  }

  std::string target_;
  SecurityOptions security_;
  std::string name_, port_;  // target_'s host when it is a name, and ":port"
  NameResolver resolve_;     // null: target_ is dialled as it is
  std::string address_;      // where the name pointed when last looked up
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<grpc::Channel> relay_;  // this host's stream relay; null: streams go straight to the worker
  std::unique_ptr<v1::DataService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace

std::unique_ptr<WorkerClient> make_worker_client(const std::string& target, const SecurityOptions& security,
                                                 const std::string& relay, NameResolver resolve) {
  return std::make_unique<GrpcWorkerClient>(target, security, relay, std::move(resolve));
}

}  // namespace tandem::transport
