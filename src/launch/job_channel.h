// A trainer host's end of the job channel (release_gate.h), as its rank group uses it:
// the first trainer host's gate, or another one's reporter, or neither (one host).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "tandem/launch/rank_group.h"
#include "tandem/launch/release_gate.h"

namespace tandem::launch {

// How long a first host that ends the job waits for the other hosts to hear it.
inline constexpr double kTellS = 5;

// This host's end of the job channel (release_gate.h): the first trainer host's gate (with
// other trainer hosts or data worker hosts to hear), or another one's reporter, or neither.
class JobChannel {
 public:
  explicit JobChannel(const RankGroupOptions& o, ReleaseGateOptions gate) : host_(o.context.host) {
    // Listening before any rank starts: another host's ranks may end before this one's.
    if (!o.peers.empty() || !o.worker_hosts.empty()) gate_ = std::make_unique<ReleaseGate>(std::move(gate));
    // And the other hosts join the first one's barrier now, so that their report is of this run.
    if (!o.report_to.empty()) {
      reporter_ = std::make_unique<ReleaseReporter>(
          o.context.host, ReportDoneOptions{o.report_to, o.release_port, o.release_wait_s, o.security});
    }
  }

  ReleaseGate* gate() { return gate_.get(); }
  ReleaseReporter* reporter() { return reporter_.get(); }

  // The job's end when another host caused it; nullopt while it runs on or this host did.
  std::optional<JobEnd> ended_elsewhere() {
    std::optional<JobEnd> e = gate_ ? gate_->ending() : reporter_ ? reporter_->ending() : std::nullopt;
    if (e && e->host == host_) e.reset();
    return e;
  }

  // A rank of this host failed first: the job hears it now, not when the others have stopped.
  void failing(int code, const std::string& reason) {
    if (gate_) gate_->end({host_, code, reason});
    if (reporter_) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      reporter_->report(code, [until] { return std::chrono::steady_clock::now() >= until; }, reason);
    }
  }

 private:
  std::string host_;
  std::unique_ptr<ReleaseGate> gate_;
  std::unique_ptr<ReleaseReporter> reporter_;
};

}  // namespace tandem::launch
