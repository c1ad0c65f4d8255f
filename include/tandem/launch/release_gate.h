// The end-of-job barrier of a launched command (`tandem launch -- COMMAND`): the data
// workers go only when every trainer host's ranks have ended. The first trainer host
// serves tandem.v1.JobBarrier (proto/tandem/v1/barrier.proto) over gRPC on --release-port,
// under the job's token and TLS like every other tandem RPC. Each other trainer host
// joins it when its ranks start (learning this run's identity, a random id the first
// host drew at start) and reports "host H ended, exit code C" with that id when they
// have ended. The first host releases the workers once all have reported, once
// --release-wait has passed after its own ranks ended, or at once when a rank failed
// anywhere (the job is ending anyway).
//
// A report can do one thing: let the first host release the workers sooner, never before
// its own ranks have ended. Anyone with the job's token can release them already (the
// workers' Shutdown call). A report of another run of the same job (a replay, a launcher
// left over from an earlier attempt) carries another run's id and is refused; gRPC
// serves many callers at once, so idle or slow ones cannot hold a real report out; and
// a stop (SIGTERM) ends a host's joining and reporting within a tenth of a second.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/launch/options.h"
#include "tandem/transport/options.h"


namespace tandem::launch {

// One trainer host's end, as it reports it to the first one.
struct HostDone {
  std::string host;  // its name, one of the trainer hosts (TANDEM_HOST)
  int code = 0;      // its launcher's exit code (0..255): its ranks' job_exit_code
};

struct ReleaseGateOptions {
  int port = 0;                        // the port the first host listens on (release_port())
  std::vector<std::string> expected;   // the other trainer hosts' names
  SecurityOptions security;            // the job's token, name and TLS
};

// The port of the barrier: --release-port, or --master-port + 1 when it is 0, the same on
// every host since they read the same settings. Throws ConfigError when that is past 65535.
int release_port(const LaunchOptions& launch, int master_port);

// The first trainer host's end: serves JobBarrier on opts.port from construction (the
// other hosts' ranks may end before its own) until destruction.
class ReleaseGate {
 public:
  // Throws ConfigError naming --release-port when the port cannot be bound.
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

  int port() const;               // the bound port (opts.port, or the system's for 0)
  const std::string& run() const;  // this run's identity

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ReportDoneOptions {
  std::string address;        // the first trainer host (MASTER_ADDR)
  int port = 0;               // release_port()
  double wait_s = 300;        // keep trying this long (--release-wait)
  SecurityOptions security;
};

// Another trainer host's end: joins the first host's barrier from construction, on a
// thread of its own (retrying until it answers; the first host may start later), so that
// its report carries the run it joined.
class ReleaseReporter {
 public:
  ReleaseReporter(std::string host, ReportDoneOptions opts);
  ~ReleaseReporter();  // stops joining
  ReleaseReporter(const ReleaseReporter&) = delete;
  ReleaseReporter& operator=(const ReleaseReporter&) = delete;

  // Tells the first host that this host's ranks ended with `code`: waits for the join,
  // then reports, retrying with a growing pause (at most 5 s) until it answers, refuses
  // (logged: retrying cannot help), wait_s passes or `stop()` returns true (looked at every
  // 100 ms, also during a pause or a call). Returns whether the report was taken; every
  // failure is logged, none thrown (the host's own exit code stands).
  bool report(int code, const std::function<bool()>& stop);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with the joining thread
};

// ReleaseReporter(done.host, opts).report(done.code, stop): joins, then reports.
bool report_done(const HostDone& done, const ReportDoneOptions& opts, const std::function<bool()>& stop);

}  // namespace tandem::launch
