// The other trainer hosts' end of the job channel (release_gate.h): join, watch, report.
#include "tandem/launch/release_gate.h"

#include "release_channel.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "tandem/common/backoff.h"
#include "tandem/common/error.h"
#include "tandem/common/exit_codes.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"
#include "tandem/v1/barrier.grpc.pb.h"

namespace tandem::launch {

using namespace channel;

constexpr double kEndedBadlyS = 10;  // how long a non-zero end is retried

struct ReleaseReporter::Impl {
  Impl(std::string h, ReportDoneOptions o) : host(std::move(h)), opts(std::move(o)) {
    grpc::ChannelArguments args;
    if (!opts.security.tls_server_name.empty()) args.SetSslTargetNameOverride(opts.security.tls_server_name);
    // The first host may start a little after this one: reconnect within a second, not
    // after gRPC's growing backoff (up to 2 min), in which every call fails at once.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    const bool v6 = opts.address.find(':') != std::string::npos && opts.address.front() != '[';
    where = fmt::format("{}:{}", v6 ? "[" + opts.address + "]" : opts.address, opts.port);
    stub = v1::JobBarrier::NewStub(
        grpc::CreateCustomChannel(where, transport::channel_credentials(opts.security), args));
  }

  std::unique_ptr<grpc::ClientContext> context(double seconds = kCallS) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    transport::authorise(*ctx, opts.security);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000)));
    return ctx;
  }

  // Joins until it has the run, is refused, or `stop` is set (the reporter's thread):
  // every second at most, since the ranks may fail (and need the channel) at any time.
  void join() {
    Backoff backoff({0.2, 2, 1});
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
          spdlog::info("joined the job channel of the first trainer host ({}, --release-port), run {}", where, *run);
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

  grpc::Status send_report(const std::string& run_id, int code, const std::string& reason) {
    v1::ReportRequest req;
    req.set_host(host);
    req.set_run(run_id);
    req.set_code(code);
    req.set_reason(reason);
    v1::ReportReply reply;
    return stub->Report(context().get(), req, &reply);
  }

  void set_end(JobEnd e, bool first_gone) {
    std::lock_guard lock(mu);
    if (end) return;
    if (first_gone) gone = true;
    spdlog::error("{}", e.reason);
    end = std::move(e);
    changed.notify_all();
  }

  // Watches the run joined until the job ends, the first host is gone, or `stop`.
  void watch() {
    auto stopped = [this] { return stop.load(); };
    std::string run_id;
    {
      std::lock_guard lock(mu);
      if (!run) return;
      run_id = *run;
    }
    auto heard = Clock::now();
    while (!stopped()) {
      v1::WatchRequest req;
      req.set_host(host);
      req.set_run(run_id);
      v1::WatchReply reply;
      auto ctx = context(kHoldS + 2);
      {
        std::lock_guard lock(mu);
        call = ctx.get();
      }
      const grpc::Status s = stub->Watch(ctx.get(), req, &reply);
      {
        std::lock_guard lock(mu);
        call = nullptr;
      }
      if (stopped()) return;
      if (s.ok()) {
        heard = Clock::now();
        if (!reply.ending()) continue;
        set_end({reply.cause_host(), reply.code(),
                 fmt::format("the first trainer host ({}) says the job is ending: {}", where,
                             printable(reply.reason(), 300))},
                false);
        return;
      }
      if (is_refusal(s.error_code())) {
        set_end({opts.address, kExitPeer,
                 fmt::format("the first trainer host ({}) refused this host's watch: {} (it started again, or "
                             "another job took its port): stopping this host's ranks",
                             where, printable(s.error_message(), 300))},
                true);
        return;
      }
      const double silent = std::chrono::duration<double>(Clock::now() - heard).count();
      if (silent >= opts.silent_s) {
        set_end({opts.address, kExitPeer,
                 fmt::format("the first trainer host ({}) has not answered for {:.0f} s (last: {}): it is gone; "
                             "stopping this host's ranks",
                             where, silent, printable(s.error_message(), 200))},
                true);
        return;
      }
      if (!pause(1.0, stopped)) return;
    }
  }

  const std::string host;
  const ReportDoneOptions opts;
  std::string where;  // "address:port", for messages
  std::unique_ptr<v1::JobBarrier::Stub> stub;
  std::atomic<bool> stop{false};
  mutable std::mutex mu;
  std::condition_variable changed;
  std::optional<std::string> run;  // GUARDED_BY(mu): the run joined
  std::string refused;             // GUARDED_BY(mu): why the first host refused to let it join
  std::string last_error;          // GUARDED_BY(mu)
  std::optional<JobEnd> end;       // GUARDED_BY(mu): as the first host told it, or it gone
  bool gone = false;               // GUARDED_BY(mu): the first host is gone
  grpc::ClientContext* call = nullptr;  // GUARDED_BY(mu): the watch in flight
  std::thread joiner;
};

ReleaseReporter::ReleaseReporter(std::string host, ReportDoneOptions opts)
    : impl_(std::make_shared<Impl>(std::move(host), std::move(opts))) {
  impl_->joiner = std::thread([impl = impl_] {
    impl->join();
    impl->watch();
  });
}

ReleaseReporter::~ReleaseReporter() {
  impl_->stop = true;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->call) impl_->call->TryCancel();
  }
  if (impl_->joiner.joinable()) impl_->joiner.join();
}

std::optional<JobEnd> ReleaseReporter::ending() const {
  std::lock_guard lock(impl_->mu);
  return impl_->end;
}

// The run joined, once the join has happened: nullopt (logged) when it never did
// before `deadline` or `stop`, or when the first host refused this host.
std::optional<std::string> joined_run(ReleaseReporter::Impl& r, Clock::time_point deadline,
                                      const std::function<bool()>& stop,
                                      const std::function<void(const std::string&)>& give_up) {
  std::unique_lock lock(r.mu);
  while (!r.run && r.refused.empty()) {
    if (stop && stop()) {
      give_up("stopped");
      return std::nullopt;
    }
    if (Clock::now() >= deadline) {
      give_up("it never answered; last: " + r.last_error);
      return std::nullopt;
    }
    r.changed.wait_until(lock, std::min(deadline, after(kSliceS)));
  }
  if (!r.refused.empty()) {
    spdlog::error("the first trainer host ({}, --release-port) refused this host: {}", r.where,
                  printable(r.refused, 300));
    return std::nullopt;
  }
  return r.run;
}

bool ReleaseReporter::report(int code, const std::function<bool()>& stop, const std::string& reason) {
  Impl& r = *impl_;
  const std::string where = fmt::format("the first trainer host ({}, --release-port)", r.where);
  // Only the end of ranks that finished holds the workers: a failed or stopped host's end
  // ends the job anyway (the first host does not wait for it), so it is not retried long.
  const auto deadline = after(code == 0 ? r.opts.wait_s : std::min(r.opts.wait_s, kEndedBadlyS));
  auto give_up = [&](const std::string& why) {
    spdlog::warn("could not tell {} that this host's ranks ended ({}): it releases the workers once --release-wait "
                 "has passed after its own ranks ended",
                 where, why);
    return false;
  };
  // The join first: this report is of the run it joined. A first host never reached
  // while this host's ranks ran is waited for silent_s more, not --release-wait.
  const std::optional<std::string> run =
      joined_run(r, std::min(deadline, after(r.opts.silent_s)), stop, [&](const std::string& why) { give_up(why); });
  if (!run) return false;
  Backoff backoff({0.2, 2, 5});
  std::string last;
  for (int attempts = 1;; ++attempts) {
    bool told = false;  // the first host has ended the job and is leaving: one try, it needs no report now
    {
      std::lock_guard lock(r.mu);
      if (r.gone) {
        spdlog::warn("not telling {} that this host's ranks ended: it is gone", where);
        return false;
      }
      told = r.end.has_value();
    }
    const grpc::Status s = r.send_report(*run, code, reason);
    if (s.ok()) {
      spdlog::info("told {} that this host's ranks ended (exit {})", where, code);
      return true;
    }
    if (is_refusal(s.error_code())) {
      spdlog::error("{} refused this host's report: {}", where, printable(s.error_message(), 300));
      return false;
    }
    last = s.error_message();
    if (told) {
      spdlog::info("{} has ended the job and is leaving: this host's end (exit {}) is not needed there", where, code);
      return false;
    }
    // It listened when this host joined, and listens until it exits: a refused connection
    // now means it has exited (its workers released), not that it is slow to answer.
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE && last.find("Connection refused") != std::string::npos) {
      spdlog::info("{} has exited (its port refuses connections): this host's end (exit {}) is not needed there",
                   where, code);
      return false;
    }
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
