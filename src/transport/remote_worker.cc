#include "tandem/transport/remote_worker.h"

#include "batch_method.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
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

// "image size 64, this trainer expects 32 (--image-size)": the settings in which what a
// worker serves differs from `expected`; both hashes when it does not say (an older tandem).
std::string dataset_difference(const WorkerInfo& wi, const data::DatasetInfo& expected) {
  if (std::string named = data::describe_difference(wi.fingerprint_description, expected.description); !named.empty()) {
    return named;
  }
  return "dataset '" + printable(wi.dataset, 80) + "' of " + std::to_string(wi.size) + " samples, fingerprint " +
         printable(wi.fingerprint, 40) + ", but this trainer expects '" + expected.name + "' of " +
         std::to_string(expected.size) + " samples, fingerprint " + expected.fingerprint +
         " (--data, --seed, --image-size, ...)";
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

  struct Outcome {
    enum Kind { kDone, kTransient, kPermanent } kind;
    std::string why;
  };
  void run(feed::Scheduler& scheduler, int id, const std::string& target, bool absent);
  bool rejoin(const std::string& target, double& backoff);
  Outcome stream(feed::Scheduler& scheduler, int id, const std::string& target);
  std::optional<data::DatasetInfo> expect;
  std::condition_variable retry_cv;  // wakes a backoff pause on stop()
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
  try {
    return from_proto(reply);
  } catch (const PeerError& e) {
    throw PeerError(with_context("data worker " + target_, e));
  }
}

void RemoteWorker::start(feed::Scheduler& scheduler, int source_id, const data::DatasetInfo* expect, bool absent) {
  if (expect) impl_->expect = *expect;
  impl_->reader = std::thread([this, &scheduler, source_id, absent] { impl_->run(scheduler, source_id, target_, absent); });
}

namespace {

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

}  // namespace

// Streams until the work is done; a worker that drops out for a transient reason is
// retried with backoff (1 s doubling to 30 s) and rejoins once it answers its health
// check and serves the same dataset. Its requests meanwhile go to the other sources.
void RemoteWorker::Impl::run(feed::Scheduler& scheduler, int id, const std::string& target, bool absent) {
  double backoff = 1;
  std::string why = "not answering at start";
  if (absent) scheduler.fail(id, "data worker " + target + " " + why, /*may_return=*/true);
  for (;;) {
    if (!absent) {
      {
        std::lock_guard lock(mu);
        if (stopping) return;
        ctx = std::make_unique<grpc::ClientContext>();
        authorise(*ctx, security);
      }
      const Outcome o = stream(scheduler, id, target);
      if (o.kind == Outcome::kDone || stopping) return;
      if (o.kind == Outcome::kPermanent) {
        spdlog::warn("{}; its requests go to the other sources", o.why);
        scheduler.fail(id, o.why);
        return;
      }
      why = o.why;
      spdlog::warn("{}; its requests go to the other sources, retrying it", why);
      scheduler.fail(id, why, /*may_return=*/true);
    }
    absent = false;
    if (!rejoin(target, backoff)) {
      if (!stopping) scheduler.abandon(id, why);
      return;
    }
    spdlog::info("data worker {} rejoined", target);
    scheduler.revive(id);
    backoff = 1;
  }
}

// Waits (with growing pauses) until the worker answers health and identity checks.
// False when stopping, or when it answers with another dataset (then never again).
bool RemoteWorker::Impl::rejoin(const std::string& target, double& backoff) {
  auto health = grpc::health::v1::Health::NewStub(channel);
  for (;;) {
    {
      std::unique_lock lock(mu);
      retry_cv.wait_for(lock, std::chrono::duration<double>(backoff), [&] { return stopping.load(); });
      if (stopping) return false;
    }
    backoff = std::min(backoff * 2, 30.0);
    grpc::ClientContext hctx;
    hctx.set_deadline(after(2));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    if (!health->Check(&hctx, req, &resp).ok() || resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      continue;
    }
    grpc::ClientContext ictx;
    ictx.set_deadline(after(5));
    authorise(ictx, security);
    v1::InfoRequest ireq;
    v1::InfoReply reply;
    if (!stub->Info(&ictx, ireq, &reply).ok()) continue;
    if (expect && (reply.fingerprint() != expect->fingerprint || reply.size() != expect->size)) {
      spdlog::error("data worker {} came back serving other data ({}): not using it", target,
                    dataset_difference(from_proto(reply), *expect));
      return false;
    }
    return true;
  }
}

RemoteWorker::Impl::Outcome RemoteWorker::Impl::stream(feed::Scheduler& scheduler, int id, const std::string& target) {
  // The copy-free reader (batch_method.h) in place of the generated protobuf stub.
  const std::unique_ptr<ClientBatchStream> rw = open_copy_free(*channel, *ctx);
  std::atomic<bool> writer_finished{false};
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
          throw PeerError("sent a malformed batch: " + problem + "; dropping this worker");
        }
      }
      scheduler.complete(id, std::move(batch));
    } catch (const Error& e) {  // a malformed batch (PeerError), or a request it refused
      bad_batch = with_context("data worker " + target, e);
      ctx->TryCancel();
    }
  }
  const bool writer_was_done = writer_finished;
  // The writer may be parked in acquire(); retiring the source wakes it.
  scheduler.retire(id);
  writer.join();
  const grpc::Status status = rw->Finish();
  if (stopping) return {Outcome::kDone, ""};
  if (!bad_batch.empty()) return {Outcome::kPermanent, bad_batch};
  if (status.ok()) {
    if (writer_was_done) return {Outcome::kDone, ""};
    return {Outcome::kTransient, "data worker " + target + " ended its stream early"};
  }
  const std::string why = "data worker " + target + " failed: " + describe(status);
  return {transient(status) ? Outcome::kTransient : Outcome::kPermanent, why};
}

void RemoteWorker::stop() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
    if (impl_->ctx) impl_->ctx->TryCancel();
  }
  impl_->retry_cv.notify_all();
  if (impl_->reader.joinable()) impl_->reader.join();
}

data::DatasetInfo RemoteWorker::learn_dataset(double timeout_s) {
  const WorkerInfo wi = info(timeout_s);
  data::DatasetInfo d;
  d.name = printable(wi.dataset, 80);
  d.size = wi.size;
  d.fingerprint = printable(wi.fingerprint, 80);
  d.description = wi.fingerprint_description;
  d.sample_shape = wi.sample_shape;
  d.dtype = wi.dtype;
  d.num_classes = wi.num_classes;
  d.mean = wi.mean;
  d.std = wi.std;
  d.class_names = wi.class_names;
  if (const std::string problem = data::info_problem(d); !problem.empty()) {
    throw PeerError("data worker " + target_ + " (" + wi.host + ") describes its dataset with " + problem +
                       ", which a trainer cannot build a model on: run the same tandem version on every host");
  }
  spdlog::info("dataset learnt from data worker {} ({}): '{}' of {} samples, {} classes, fingerprint {}", target_,
               wi.host, d.name, d.size, d.num_classes, d.fingerprint);
  return d;
}

WorkerInfo RemoteWorker::check_serves(const data::DatasetInfo& expected, double timeout_s) {
  const WorkerInfo wi = info(timeout_s);
  if (wi.fingerprint != expected.fingerprint || wi.size != expected.size) {
    throw ConfigError("data worker " + target_ + " (" + wi.host + ") serves " + dataset_difference(wi, expected) +
                      ": give every host the same data settings");
  }
  spdlog::info("data worker {} ({}) ready: {}", target_, wi.host, counted(wi.threads, "thread"));
  return wi;
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
