// The workers of a launched command (`tandem launch -- COMMAND`) go only when every
// trainer host's ranks have ended: each other trainer host tells the first one "host H
// done, exit code C" over TCP (--release-port on MASTER_ADDR), and the first host releases
// the workers once all have told it, once --release-wait has passed after its own ranks
// ended, or at once when a rank failed anywhere (the job is ending anyway).
//
// The channel carries only that report, and a report can do one thing: let the first
// host release the workers sooner, never before its own ranks have ended. Anyone with
// the job's token can release them already (the workers' Shutdown call), so a report is
// signed with the token (HMAC-SHA256 over the job name, host and code; the token itself
// never travels here) and a report from a peer without it is ignored with a log line. A
// job without a token has workers anyone who reaches them may stop: its reports are not
// signed either. A replayed report can only repeat what a host of this job (same token
// and job name) really said.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tandem/common/settings.h"

namespace tandem::launch {

// One trainer host's end, as it reports it to the first one.
struct HostDone {
  std::string host;  // its name, one of the trainer hosts (TANDEM_HOST)
  int code = 0;      // its launcher's exit code (0..255): its ranks' job_exit_code
};

// The line a host sends: a JSON object with the protocol version, the job name, `done`
// and, when `security` has a token, its signature. No newline.
std::string done_message(const HostDone& done, const SecurityOptions& security);

// Reads a line from done_message: fills `out` and returns "" when it is well formed, of
// this job, signed with this token (when there is one) and from one of `expected`;
// otherwise what is wrong with it, for a log line.
std::string check_done_message(const std::string& line, const SecurityOptions& security,
                               const std::vector<std::string>& expected, HostDone& out);

struct ReleaseGateOptions {
  int port = 0;                        // the port the first host listens on (release_port())
  std::vector<std::string> expected;   // the other trainer hosts' names
  SecurityOptions security;            // the token and job name reports are signed with
  double read_timeout_s = 5;           // one connection's deadline to send its whole line
};

// The port of the reports: --release-port, or --master-port + 1 when it is 0, the same on
// every host since they read the same settings. Throws ConfigError when that is past 65535.
int release_port(const LaunchOptions& launch, int master_port);

// The first trainer host's end: listens on opts.port from construction (the other hosts'
// ranks may end before its own) until destruction, on a thread of its own.
class ReleaseGate {
 public:
  // REQUIRES: the stop signals are blocked in this thread (its listener must not take
  // them). Throws ConfigError naming --release-port when the port cannot be bound.
  explicit ReleaseGate(ReleaseGateOptions opts);
  ~ReleaseGate();
  ReleaseGate(const ReleaseGate&) = delete;
  ReleaseGate& operator=(const ReleaseGate&) = delete;

  // What a wait saw: the reports in, the hosts that never reported.
  struct Outcome {
    std::vector<HostDone> reports;  // in the order of ReleaseGateOptions::expected
    std::vector<std::string> missing;
    bool stopped = false;           // `stop` said so before the end
  };

  // Waits until every expected host has reported, one reports a non-zero code, `wait_s`
  // seconds pass, or `stop()` (polled every 100 ms) returns true.
  Outcome wait(double wait_s, const std::function<bool()>& stop);

  int port() const { return port_; }  // the bound port (opts.port, or the system's for 0)

 private:
  void serve();
  void take(int fd, const std::string& peer);
  Outcome outcome_locked(bool stopped) const;

  const ReleaseGateOptions opts_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> done_{false};
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, int> codes_;  // GUARDED_BY(mu_): host -> its code
  std::thread thread_;                // last: it uses the fields above
};

struct ReportDoneOptions {
  std::string address;        // the first trainer host (MASTER_ADDR)
  int port = 0;               // release_port()
  double wait_s = 300;        // keep trying this long (--release-wait)
  SecurityOptions security;
};

// Tells the first trainer host that this host's ranks have ended: connects and sends
// done_message, retrying with a growing pause until it answers "ok", refuses (logged:
// retrying cannot help), `wait_s` passes or `stop()` returns true. Returns whether it
// answered "ok"; every failure is logged, none thrown (the host's own exit code stands).
bool report_done(const HostDone& done, const ReportDoneOptions& opts, const std::function<bool()>& stop);

}  // namespace tandem::launch
