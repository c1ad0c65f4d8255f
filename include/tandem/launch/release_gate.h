// The job channel of a launch with several trainer hosts: the job fails as one, and the
// data workers go only when every trainer host's ranks have ended. The first trainer host
// serves tandem.v1.JobBarrier (proto/tandem/v1/barrier.proto) over gRPC on --release-port,
// under the job's token and TLS like every other tandem RPC. Each other trainer host
// joins it when its ranks start (learning this run's identity, a random id the first
// host drew at start), watches it while they run, and reports "host H ended, exit code C"
// with that id when they have ended (at once when one of its ranks fails). The first host
// releases the workers once all have reported, once --release-wait has passed after its
// own ranks ended, or at once when a rank failed anywhere (the job is ending anyway).
//
// One failure ends the job: the first report of a non-zero code, a failure of the first
// host's own ranks, or a joined host silent for kSilentS (its watch calls stopped) ends
// the job with that host's code; every watching host hears it within a second and stops
// its ranks, and every host exits with that code. A host whose first host stops
// answering for kSilentS (or, restarted, refuses its run) stops its ranks and exits 5: a
// rank waiting in a rendezvous for a host that is gone gives up, and no host keeps
// retrying a report to a first host that has said it is ending or is gone.
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
#include <optional>
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

// What ended the job: the first trainer host whose ranks ended badly, its code, and why.
struct JobEnd {
  std::string host;
  int code = 0;
  std::string reason;  // one line
};

// How long a joined host may be silent (no watch call; one comes every few seconds)
// before the other side takes it for gone.
inline constexpr double kSilentS = 30;

struct ReleaseGateOptions {
  int port = 0;                        // the port the first host listens on (release_port())
  std::string bind = "0.0.0.0";        // the address it listens on (--bind, as the data workers')
  std::vector<std::string> expected;   // the other trainer hosts' names
  // The data worker hosts' names: one may report that it could not start (its port
  // taken, its data missing), which ends the job with its code and reason. They are not
  // waited for, nor watched for silence.
  std::vector<std::string> workers;
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

  // The job's end once a host's ranks ended badly (the first such report, or end()), or
  // a joined host has been silent for `silent_s` (ended then with exit 5); nullopt while
  // the job runs on. Cheap: a launcher polls it while its ranks run.
  std::optional<JobEnd> ending(double silent_s = kSilentS);
  // Ends the job with `cause` unless it has ended already; returns the cause that stands.
  JobEnd end(const JobEnd& cause);
  // Once the job is ending: waits until every joined host that has not reported has been
  // told (its watch answered), at most `wait_s`.
  void tell(double wait_s);

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
  double silent_s = kSilentS;  // the first host unanswering this long, once joined, is gone
};

// Another trainer host's end of the channel: joins the first host's barrier from
// construction, on a thread of its own (retrying until it answers; the first host may
// start later), so that its report carries the run it joined; then watches it until the
// job ends, the first host is gone, or this object goes.
class ReleaseReporter {
 public:
  ReleaseReporter(std::string host, ReportDoneOptions opts);
  ~ReleaseReporter();  // stops joining and watching
  ReleaseReporter(const ReleaseReporter&) = delete;
  ReleaseReporter& operator=(const ReleaseReporter&) = delete;

  // Tells the first host that this host's ranks ended with `code`: waits for the join,
  // then reports, retrying with a growing pause (at most 5 s) until it answers, refuses
  // (logged: retrying cannot help), wait_s passes (10 s for a non-zero code: the job is
  // ending anyway, and the first host does not wait for it) or `stop()` returns true (looked at every
  // 100 ms, also during a pause or a call). Gives up at once when the first host is gone,
  // and after one try when it said the job is ending (it is leaving, and needs no report). Returns whether the
  // report was taken; every failure is logged, none thrown (the host's own code stands).
  // `reason`: one line saying why, when `code` is not 0.
  bool report(int code, const std::function<bool()>& stop, const std::string& reason = "");

  // The job's end as the first host told it, or (exit 5) the first host gone: silent for
  // opts.silent_s after the join, or refusing this host's run (it started again);
  // nullopt while the job runs on.
  std::optional<JobEnd> ending() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;  // shared with the joining thread
};

// ReleaseReporter(done.host, opts).report(done.code, stop): joins, then reports.
bool report_done(const HostDone& done, const ReportDoneOptions& opts, const std::function<bool()>& stop);

}  // namespace tandem::launch
