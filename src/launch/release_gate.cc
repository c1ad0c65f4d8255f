#include "tandem/launch/release_gate.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "tandem/common/backoff.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"
#include "tandem/v1/barrier.grpc.pb.h"

namespace tandem::launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kSliceS = 0.1;  // how often a wait looks at `stop`
constexpr double kCallS = 1.0;   // one Join or Report call's deadline

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double left_until(Clock::time_point t) { return std::chrono::duration<double>(t - Clock::now()).count(); }

// 128 random bits, as hex: a run's identity.
std::string random_run_id() {
  std::random_device device;
  std::string out;
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", device());
  return out;
}


// Answers that retrying cannot change: the caller is not of this job or run.
bool is_refusal(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::FAILED_PRECONDITION ||
         code == grpc::StatusCode::UNIMPLEMENTED;
}

// Sleeps `seconds` in slices, returning early (false) when `stop` says so.
bool pause(double seconds, const std::function<bool()>& stop) {
  const auto until = after(seconds);
  while (Clock::now() < until) {
    if (stop && stop()) return false;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(kSliceS, std::max(0.0, left_until(until)))));
  }
  return !(stop && stop());
}

}  // namespace

int release_port(const LaunchOptions& launch, int master_port) {
  if (launch.release_port > 0) return launch.release_port;
  if (master_port >= 65535) {
    throw ConfigError("--master-port 65535 leaves no port above it for the trainer hosts' reports that their ranks "
                      "ended: give one with --release-port");
  }
  return master_port + 1;
}

// ---- the first trainer host ----------------------------------------------------------------

struct ReleaseGate::Impl final : v1::JobBarrier::Service {
  explicit Impl(ReleaseGateOptions o) : opts(std::move(o)), run(random_run_id()), job(opts.security.job) {}

  // The caller carries the job's token and name, and names one of the other trainer hosts.
  grpc::Status admit(const grpc::ServerContext& ctx, const std::string& host, const char* what) {
    grpc::Status s = transport::check_caller(ctx, opts.security, job, /*claim=*/false);
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {  // its message speaks of data workers
      s = {s.error_code(), "the job's token is missing or wrong: give every trainer host the same TANDEM_TOKEN, "
                           "--token-file or token setting"};
    } else if (!s.ok()) {
      s = {s.error_code(), "a launcher of job '" + printable(caller_job(ctx), 80) + "', not of this job ('" +
                               opts.security.job + "'): give every trainer host the same --job-name"};
    }
    if (s.ok() && std::find(opts.expected.begin(), opts.expected.end(), host) == opts.expected.end()) {
      s = {grpc::StatusCode::PERMISSION_DENIED, "host '" + printable(host, 80) +
                                                    "' is not one of the other trainer hosts (" +
                                                    joined(opts.expected, ", ") + ")"};
    }
    if (!s.ok()) spdlog::warn("refused a {} from {} on the release port {}: {}", what, ctx.peer(), port, s.error_message());
    return s;
  }

  static std::string caller_job(const grpc::ServerContext& ctx) {
    const auto& md = ctx.client_metadata();
    const auto it = md.find("tandem-job");
    return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
  }

  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req, v1::JoinReply* reply) override {
    grpc::Status s = admit(*ctx, req->host(), "join");
    if (s.ok()) reply->set_run(run);
    return s;
  }

  grpc::Status Report(grpc::ServerContext* ctx, const v1::ReportRequest* req, v1::ReportReply*) override {
    grpc::Status s = admit(*ctx, req->host(), "report");
    if (!s.ok()) return s;
    if (req->run() != run) {
      s = {grpc::StatusCode::FAILED_PRECONDITION,
           "a report of another run of this job (run '" + printable(req->run(), 40) + "'; this run is '" + run +
               "'): a launcher left over from an earlier attempt, or a replay"};
      spdlog::warn("refused a report from {} ({}) on the release port {}: {}", req->host(), ctx->peer(), port,
                   s.error_message());
      return s;
    }
    if (req->code() < 0 || req->code() > 255) {
      return {grpc::StatusCode::INVALID_ARGUMENT, fmt::format("exit code {} is not one (0..255)", req->code())};
    }
    std::lock_guard lock(mu);
    if (codes.emplace(req->host(), req->code()).second) {  // else a retry of one already taken
      spdlog::info("trainer host {} reports its ranks ended (exit {})", req->host(), req->code());
      changed.notify_all();
    }
    return grpc::Status::OK;
  }

  Outcome outcome_locked(bool stopped) const {
    Outcome o;
    o.stopped = stopped;
    for (const auto& h : opts.expected) {
      const auto it = codes.find(h);
      if (it == codes.end()) o.missing.push_back(h);
      else o.reports.push_back({h, it->second});
    }
    return o;
  }

  const ReleaseGateOptions opts;
  const std::string run;
  transport::WorkerJob job;  // admits callers of this job only
  int port = 0;
  std::unique_ptr<grpc::Server> server;
  mutable std::mutex mu;
  std::condition_variable changed;
  std::map<std::string, int> codes;  // GUARDED_BY(mu): host -> its code
};

ReleaseGate::ReleaseGate(ReleaseGateOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("0.0.0.0:" + std::to_string(impl_->opts.port),
                           transport::server_credentials(impl_->opts.security), &impl_->port);
  builder.RegisterService(impl_.get());
  builder.SetMaxReceiveMessageSize(64 << 10);  // a report is a few dozen bytes
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) {
    throw ConfigError(fmt::format("cannot listen on the release port {} (where the other trainer hosts report that "
                                  "their ranks ended): is another process using it? Set --release-port to a free one, "
                                  "the same on every host",
                                  impl_->opts.port));
  }
  spdlog::debug("release barrier of run {} on port {}", impl_->run, impl_->port);
}

ReleaseGate::~ReleaseGate() {
  // Calls in flight get a moment; then the server goes.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

int ReleaseGate::port() const { return impl_->port; }
const std::string& ReleaseGate::run() const { return impl_->run; }

ReleaseGate::Outcome ReleaseGate::wait(double wait_s, const std::function<bool()>& stop) {
  const auto deadline = after(wait_s);
  std::unique_lock lock(impl_->mu);
  while (true) {
    const Outcome o = impl_->outcome_locked(false);
    const bool failed = std::any_of(o.reports.begin(), o.reports.end(), [](const HostDone& d) { return d.code != 0; });
    if (o.missing.empty() || failed || Clock::now() >= deadline) return o;
    if (stop && stop()) return impl_->outcome_locked(true);
    impl_->changed.wait_until(lock, std::min(deadline, after(kSliceS)));
  }
}

// ---- the other trainer hosts ---------------------------------------------------------------

struct ReleaseReporter::Impl {
  Impl(std::string h, ReportDoneOptions o) : host(std::move(h)), opts(std::move(o)) {
    grpc::ChannelArguments args;
    if (!opts.security.tls_server_name.empty()) args.SetSslTargetNameOverride(opts.security.tls_server_name);
    const bool v6 = opts.address.find(':') != std::string::npos && opts.address.front() != '[';
    where = fmt::format("{}:{}", v6 ? "[" + opts.address + "]" : opts.address, opts.port);
    stub = v1::JobBarrier::NewStub(
        grpc::CreateCustomChannel(where, transport::channel_credentials(opts.security), args));
  }

  std::unique_ptr<grpc::ClientContext> context() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    transport::authorise(*ctx, opts.security);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int>(kCallS * 1000)));
    return ctx;
  }

  // Joins until it has the run, is refused, or `stop` is set (the reporter's thread).
  void join() {
    Backoff backoff({0.2, 2, 5});
    auto stopped = [this] { return stop.load(); };
    while (!stopped()) {
      v1::JoinRequest req;
      req.set_host(host);
      v1::JoinReply reply;
      const grpc::Status s = stub->Join(context().get(), req, &reply);
      {
        std::lock_guard lock(mu);
        if (s.ok()) {
          run = reply.run();
        } else if (is_refusal(s.error_code())) {
          refused = s.error_message();
        } else {
          last_error = s.error_message();
        }
        changed.notify_all();
        if (run || !refused.empty()) return;
      }
      if (!pause(backoff.next(), stopped)) return;
    }
  }

  const std::string host;
  const ReportDoneOptions opts;
  std::string where;  // "address:port", for messages
  std::unique_ptr<v1::JobBarrier::Stub> stub;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable changed;
  std::optional<std::string> run;  // GUARDED_BY(mu): the run joined
  std::string refused;             // GUARDED_BY(mu): why the first host refused to let it join
  std::string last_error;          // GUARDED_BY(mu)
  std::thread joiner;
};

ReleaseReporter::ReleaseReporter(std::string host, ReportDoneOptions opts)
    : impl_(std::make_shared<Impl>(std::move(host), std::move(opts))) {
  impl_->joiner = std::thread([impl = impl_] { impl->join(); });
}

ReleaseReporter::~ReleaseReporter() {
  impl_->stop = true;
  if (impl_->joiner.joinable()) impl_->joiner.join();
}

bool ReleaseReporter::report(int code, const std::function<bool()>& stop) {
  Impl& r = *impl_;
  const std::string where = fmt::format("the first trainer host ({}, --release-port)", r.where);
  const auto deadline = after(r.opts.wait_s);
  auto give_up = [&](const std::string& why) {
    spdlog::warn("could not tell {} that this host's ranks ended ({}): it releases the workers once --release-wait "
                 "has passed after its own ranks ended",
                 where, why);
    return false;
  };
  // The join first: this report is of the run it joined.
  std::string run;
  {
    std::unique_lock lock(r.mu);
    while (!r.run && r.refused.empty()) {
      if (stop && stop()) return give_up("stopped");
      if (Clock::now() >= deadline) return give_up("it never answered; last: " + r.last_error);
      r.changed.wait_until(lock, std::min(deadline, after(kSliceS)));
    }
    if (!r.refused.empty()) {
      spdlog::error("{} refused this host: {}", where, printable(r.refused, 300));
      return false;
    }
    run = *r.run;
  }
  Backoff backoff({0.2, 2, 5});
  std::string last;
  int attempts = 0;
  while (true) {
    v1::ReportRequest req;
    req.set_host(r.host);
    req.set_run(run);
    req.set_code(code);
    v1::ReportReply reply;
    const grpc::Status s = r.stub->Report(r.context().get(), req, &reply);
    ++attempts;
    if (s.ok()) {
      spdlog::info("told {} that this host's ranks ended (exit {})", where, code);
      return true;
    }
    if (is_refusal(s.error_code())) {
      spdlog::error("{} refused this host's report: {}", where, printable(s.error_message(), 300));
      return false;
    }
    last = s.error_message();
    if (stop && stop()) return give_up("stopped after " + counted(attempts, "attempt"));
    const double wait = std::min(backoff.next(), left_until(deadline));
    if (wait <= 0 || !pause(wait, stop)) return give_up(counted(attempts, "attempt") + ", last: " + last);
  }
}

bool report_done(const HostDone& done, const ReportDoneOptions& opts, const std::function<bool()>& stop) {
  ReleaseReporter reporter(done.host, opts);
  return reporter.report(done.code, stop);
}

}  // namespace tandem::launch
