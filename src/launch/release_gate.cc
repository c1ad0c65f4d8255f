#include "tandem/launch/release_gate.h"

#include "release_channel.h"

#include <atomic>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "tandem/common/backoff.h"
#include "tandem/common/error.h"
#include "tandem/common/exit_codes.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/v1/barrier.grpc.pb.h"

namespace tandem::launch {

namespace channel {

bool is_refusal(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::FAILED_PRECONDITION ||
         code == grpc::StatusCode::UNIMPLEMENTED;
}

bool pause(double seconds, const std::function<bool()>& stop) {
  const auto until = after(seconds);
  while (Clock::now() < until) {
    if (stop && stop()) return false;
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(kSliceS, std::max(0.0, left_until(until)))));
  }
  return !(stop && stop());
}

}  // namespace channel

namespace {

using namespace channel;

// 128 random bits, as hex: a run's identity.
std::string random_run_id() {
  std::random_device device;
  std::string out;
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", device());
  return out;
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

constexpr uint64_t kLoggedRefusals = 5;

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
    if (s.ok() && !trainer(host) && !worker(host)) {
      s = {grpc::StatusCode::PERMISSION_DENIED, "host '" + printable(host, 80) +
                                                    "' is not one of the job's other hosts (" +
                                                    joined(opts.expected, ", ") + (opts.workers.empty() ? "" : "; ") +
                                                    joined(opts.workers, ", ") + ")"};
    }
    if (!s.ok()) said_refusal(fmt::format("refused a {} from {} on the release port {}: {}", what, ctx.peer(), port,
                                          s.error_message()));
    return s;
  }

  // A refusal in the log: the first kLoggedRefusals, then one line for each hundred more
  // (a flood of forged calls must not flood the log too).
  void said_refusal(const std::string& line) const {
    const uint64_t n = ++refusals;
    if (n <= kLoggedRefusals) {
      spdlog::warn("{}", line);
    } else if (n % 100 == 0) {
      spdlog::warn("{} calls refused on the release port so far; the latest: {}", n, line);
    }
  }

  bool trainer(const std::string& host) const {
    return std::find(opts.expected.begin(), opts.expected.end(), host) != opts.expected.end();
  }
  bool worker(const std::string& host) const {
    return std::find(opts.workers.begin(), opts.workers.end(), host) != opts.workers.end();
  }

  static std::string caller_job(const grpc::ServerContext& ctx) {
    const auto& md = ctx.client_metadata();
    const auto it = md.find("tandem-job");
    return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
  }

  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req, v1::JoinReply* reply) override {
    grpc::Status s = admit(*ctx, req->host(), "join");
    if (s.ok()) {
      reply->set_run(run);
      std::lock_guard lock(mu);
      if (trainer(req->host())) last_seen[req->host()] = Clock::now();
    }
    return s;
  }

  grpc::Status of_this_run(const std::string& host, const std::string& caller_run, const grpc::ServerContext& ctx,
                           const char* what) const {
    if (caller_run == run) return grpc::Status::OK;
    grpc::Status s{grpc::StatusCode::FAILED_PRECONDITION,
                   "a " + std::string(what) + " of another run of this job (run '" + printable(caller_run, 40) +
                       "'; this run is '" + run + "'): a launcher left over from an earlier attempt, or a replay"};
    said_refusal(fmt::format("refused a {} from {} ({}) on the release port {}: {}", what, printable(host, 80),
                             ctx.peer(), port, s.error_message()));
    return s;
  }

  // A long poll: answers when the job is ending, the gate closes, or after kHoldS.
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req, v1::WatchReply* reply) override {
    grpc::Status s = admit(*ctx, req->host(), "watch");
    if (s.ok()) s = of_this_run(req->host(), req->run(), *ctx, "watch");
    if (!s.ok()) return s;
    std::unique_lock lock(mu);
    const bool watched = trainer(req->host());  // a worker host's silence means nothing
    if (watched) last_seen[req->host()] = Clock::now();
    changed.wait_until(lock, after(kHoldS), [&] { return closing || end.has_value() || ctx->IsCancelled(); });
    if (watched) last_seen[req->host()] = Clock::now();
    if (end) {
      reply->set_ending(true);
      reply->set_cause_host(end->host);
      reply->set_code(end->code);
      reply->set_reason(end->reason);
      told.insert(req->host());
      changed.notify_all();
    }
    return grpc::Status::OK;
  }

  // The first cause stands; later ones are consequences.
  JobEnd end_locked(const JobEnd& cause) {
    if (!end) {
      end = cause;
      spdlog::error("the job is ending: {}", cause.reason);
      changed.notify_all();
    }
    return *end;
  }

  grpc::Status Report(grpc::ServerContext* ctx, const v1::ReportRequest* req, v1::ReportReply*) override {
    grpc::Status s = admit(*ctx, req->host(), "report");
    if (!s.ok()) return s;
    s = of_this_run(req->host(), req->run(), *ctx, "report");
    if (!s.ok()) return s;
    if (req->code() < 0 || req->code() > 255) {
      return {grpc::StatusCode::INVALID_ARGUMENT, fmt::format("exit code {} is not one (0..255)", req->code())};
    }
    std::lock_guard lock(mu);
    if (!trainer(req->host())) return worker_failed(req->host(), req->code(), req->reason());
    last_seen[req->host()] = Clock::now();
    if (codes.emplace(req->host(), req->code()).second) {  // else a retry of one already taken
      spdlog::info("trainer host {} reports its ranks ended (exit {})", req->host(), req->code());
      if (req->code() != 0) {
        end_locked({req->host(), req->code(),
                    req->reason().empty()
                        ? fmt::format("trainer host {}'s ranks ended with exit {}", req->host(), req->code())
                        : printable(req->reason(), 300)});
      }
      changed.notify_all();
    }
    return grpc::Status::OK;
  }

  // A data worker host that could not start: the job ends with its code.
  grpc::Status worker_failed(const std::string& host, int code, const std::string& reason) {
    if (code == 0) return grpc::Status::OK;
    spdlog::error("data worker host {} could not serve (exit {})", host, code);
    end_locked({host, code,
                reason.empty() ? fmt::format("data worker host {} failed with exit {}", host, code)
                               : printable(reason, 300)});
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
  std::map<std::string, Clock::time_point> last_seen;  // GUARDED_BY(mu): a joined host's last call
  std::set<std::string> told;         // GUARDED_BY(mu): hosts whose watch answered with the end
  std::optional<JobEnd> end;          // GUARDED_BY(mu)
  mutable std::atomic<uint64_t> refusals{0};  // calls refused (said_refusal)
  bool closing = false;               // GUARDED_BY(mu): the gate goes; held watches answer
};

ReleaseGate::ReleaseGate(ReleaseGateOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {
  grpc::ServerBuilder builder;
  const std::string& host = impl_->opts.bind;
  const std::string address =
      (host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host) + ":" +
      std::to_string(impl_->opts.port);
  builder.AddListeningPort(address, transport::server_credentials(impl_->opts.security), &impl_->port);
  builder.RegisterService(impl_.get());
  builder.SetMaxReceiveMessageSize(64 << 10);  // a report is a few dozen bytes
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) {
    throw ConfigError(fmt::format("cannot listen on the release port {} (where the other trainer hosts report that "
                                  "their ranks ended): {}",
                                  impl_->opts.port,
                                  transport::bind_failure(address, "--release-port (the same on every host) or --bind")));
  }
  spdlog::debug("release barrier of run {} on port {}", impl_->run, impl_->port);
  if (impl_->opts.security.token.empty() && !transport::is_loopback(address)) {
    spdlog::warn("THE JOB CHANNEL IS OPEN: no token is set, so anyone who reaches port {} of this host can end this "
                 "job or have its data workers released. Set TANDEM_TOKEN (or --token-file) on every host of the job, "
                 "or keep the network private (docs/security.md)",
                 impl_->port);
  }
}

ReleaseGate::~ReleaseGate() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->closing = true;
    impl_->changed.notify_all();
  }
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

std::optional<JobEnd> ReleaseGate::ending(double silent_s) {
  std::lock_guard lock(impl_->mu);
  if (impl_->end) return impl_->end;
  const auto now = Clock::now();
  for (const auto& [host, seen] : impl_->last_seen) {
    if (impl_->codes.count(host) || std::chrono::duration<double>(now - seen).count() < silent_s) continue;
    return impl_->end_locked({host, kExitPeer,
                              fmt::format("trainer host {} has not been heard from for {:g} s (its launcher watches "
                                          "the job every few seconds): it is gone or cut off",
                                          host, silent_s)});
  }
  return std::nullopt;
}

JobEnd ReleaseGate::end(const JobEnd& cause) {
  std::lock_guard lock(impl_->mu);
  return impl_->end_locked(cause);
}

void ReleaseGate::tell(double wait_s) {
  std::unique_lock lock(impl_->mu);
  Impl& g = *impl_;
  g.changed.wait_until(lock, after(wait_s), [&g] {
    for (const auto& [host, seen] : g.last_seen) {
      if (!g.codes.count(host) && !g.told.count(host)) return false;
    }
    return true;
  });
}

}  // namespace tandem::launch
