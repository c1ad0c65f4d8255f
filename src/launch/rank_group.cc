#include "tandem/launch/rank_group.h"

#include "job_channel.h"
#include "signal_pipe.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/common/environment.h"
#include "tandem/common/error.h"
#include "tandem/common/exit_codes.h"
#include "tandem/common/signals.h"
#include "tandem/common/text.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/launch/release_gate.h"
#include "tandem/report/failed_run.h"
#include "tandem/report/output_lock.h"
#include "tandem/report/summary.h"
#include "tandem/training/trainer.h"
#include "tandem/transport/stream_relay.h"

namespace tandem::launch {
namespace {

namespace fs = std::filesystem;

// The host's stream relay when its ranks share their streams (--share-streams).
class HostRelay {
 public:
  explicit HostRelay(RankGroupOptions& o) {
    if (!o.share_streams || o.procs < 2) return;
    relay_ = std::make_unique<transport::StreamRelay>(transport::StreamRelayOptions{"", o.security});
    o.context.stream_relay = relay_->address();
    spdlog::info("this host's {} ranks share one stream to each data worker through {} (--share-streams)", o.procs,
                 relay_->address());
  }
  ~HostRelay() {
    if (!relay_) return;
    const transport::StreamRelay::Stats s = relay_->stats();
    spdlog::info("stream relay: {} batches handed to the ranks, at most {} to data workers at once", s.batches,
                 counted(s.worker_streams_peak, "stream"));
  }
  HostRelay(const HostRelay&) = delete;
  HostRelay& operator=(const HostRelay&) = delete;

 private:
  std::unique_ptr<transport::StreamRelay> relay_;
};

// What SageMaker shows of output/failure (DescribeTrainingJob's FailureReason).
constexpr size_t kFailureChars = 1024;

std::string shown(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += printable(a, 200);
  }
  return out;
}

int code_of(const ExitStatus& s) { return s.signal != 0 ? 128 + s.signal : std::max(s.exit_code, 1); }

// The rank that ended the host: the one whose failure stopped the others, else the
// first that did not exit 0; nullptr when every rank exited 0.
const ExitStatus* culprit(const std::vector<ExitStatus>& ranks) {
  for (const auto& s : ranks) {
    if (s.stopped_others) return &s;
  }
  for (const auto& s : ranks) {
    if (!s.ok()) return &s;
  }
  return nullptr;
}

ReleaseGateOptions gate_options(const RankGroupOptions& o) {
  ReleaseGateOptions g;
  g.port = o.release_port;
  g.bind = o.release_bind;
  g.expected = o.peers;
  g.workers = o.worker_hosts;
  g.security = o.security;
  return g;
}

// How logs and output/failure name the group's program.
std::vector<std::string> program(const RankGroupOptions& o) {
  return o.shown.empty() ? o.argv : std::vector<std::string>{o.shown};
}

std::vector<ProcessSpec> rank_specs(const RankGroupOptions& o) {
  std::vector<ProcessSpec> specs;
  for (int local = 0; local < o.procs; ++local) {
    const RankPlace place = RankPlace::on_host(o.group_rank, o.groups, local, o.procs);
    ProcessSpec p;
    p.name = "rank-" + std::to_string(place.rank);
    p.argv = o.argv;
    p.env = rank_environment(o.context, place);
    specs.push_back(std::move(p));
  }
  return specs;
}

void release(const RankGroupOptions& o, int code) {
  if (o.release.empty()) return;
  const std::string reason = code == 0                 ? "every rank of " + shown(program(o)) + " ended"
                             : code == kExitInterrupted ? shown(program(o)) + " stopped (interrupted, exit 75)"
                                                        : shown(program(o)) + " failed (exit " + std::to_string(code) + ")";
  const int acknowledged = feed::release_workers(o.release, o.security, reason);
  spdlog::info("released {} of {} ({})", acknowledged, counted(o.release.size(), "data worker"), reason);
}

// A data worker host's report that it could not start ends a running job, but not one
// whose ranks had all ended well already.
bool ended_by_worker(const RankGroupOptions& o, const JobEnd& e) {
  return std::find(o.worker_hosts.begin(), o.worker_hosts.end(), e.host) != o.worker_hosts.end();
}

// The first trainer host, its ranks ended with `code` (the job's, when another host
// ended it): waits for the other hosts' ranks (not when the job is ending), releases the
// workers, and returns the host's exit code: its own, else the first failure another
// host reported.
int release_after_peers(const RankGroupOptions& o, ReleaseGate& gate, int code) {
  SignalCatcher signals;  // a stop ends the wait: the workers go at once
  bool stopped = false;
  auto stop = [&] { return stopped = stopped || !signals.take().empty(); };
  if (code == 0) {
    spdlog::info("waiting up to {} s (--release-wait) for the ranks of {} before releasing the workers",
                 o.release_wait_s, joined(o.peers, ", "));
  }
  const ReleaseGate::Outcome seen = gate.wait(code == 0 ? o.release_wait_s : 0, stop);
  if (!seen.missing.empty() && code == 0) {
    const std::string why = seen.stopped ? "this launcher was stopped"
                                         : fmt::format("--release-wait {} s has passed", o.release_wait_s);
    spdlog::warn("releasing the workers without word from {} that their ranks ended: {}",
                 counted(seen.missing.size(), "trainer host") + " (" + joined(seen.missing, ", ") + ")", why);
  }
  int job = code;
  if (code != 0) {
    gate.end({o.context.host, code, fmt::format("trainer host {}'s ranks ended with exit {}", o.context.host, code)});
  } else if (const std::optional<JobEnd> e = gate.ending(); e && !ended_by_worker(o, *e)) {
    job = e->code;
    const std::string why = fmt::format("trainer host {} failed (exit {}): its output/failure.{} says why; the ranks "
                                        "of this host ({}) exited 0\n",
                                        e->host, e->code, e->host, o.context.host);
    spdlog::error("{}", why.substr(0, why.size() - 1));
    if (!o.failure_root.empty()) report::write_failure(o.failure_root, o.context.host, why);
  }
  if (job != 0) gate.tell(kTellS);  // the other hosts stop their ranks: the job is over
  release(o, job);
  return job;
}

// Another trainer host: tells the first one its ranks ended, so the workers can go.
void report_end(ReleaseReporter& reporter, int code, const std::string& reason) {
  SignalCatcher signals;
  bool stopped = false;
  auto stop = [&] { return stopped = stopped || !signals.take().empty(); };
  reporter.report(code, stop, reason);
}

// "rank-N on trainer host H exited C": the rank that ended this host; "" when none did.
std::string failed_rank(const std::vector<ExitStatus>& ranks, const std::string& host) {
  const ExitStatus* s = culprit(ranks);
  return s ? fmt::format("{} on trainer host {} {}", s->name, host, s->describe()) : "";
}

// output/failure's text for a host whose ranks ended with `code`; "" when it is 0.
std::string host_failure(const RankGroupOptions& o, const std::vector<ExitStatus>& ranks, bool signalled,
                         const std::optional<JobEnd>& elsewhere) {
  std::string why = failure_report(ranks, program(o));
  if (elsewhere) {
    why = fmt::format("the ranks of trainer host {} were stopped because the job is ending: {}\n{}", o.context.host,
                      elsewhere->reason, why);
  } else if (signalled) {  // say why the ranks died of SIGTERM: the job was stopped, not broken
    why = "the job was stopped: this launcher received SIGTERM or SIGINT (a SageMaker stop, a spot interruption, a "
          "scheduler's time limit) and stopped the ranks\n" + why;
  }
  if (!why.empty() && why.back() == '\n') why.pop_back();
  return why;
}

// Whether this host writes its records (output/failure, a script's failed summary): a
// rank refused because another live run holds the output folder (output_lock.h) leaves
// that run's files alone, its reason in this log only.
bool records(const RankGroupOptions& o) {
  return !o.failure_root.empty() && !report::held_by_another_run(o.failure_root, o.context.host, getpid());
}

// This host's failure in its records: output/failure.<host> (and output/failure when
// `first_cause`), and for a user's script on the first host its run's summary and report.
void record_host_failure(const RankGroupOptions& o, int code, const std::string& why, bool first_cause,
                         double started) {
  if (!records(o)) return;
  report::write_failure(o.failure_root, o.context.host, why, first_cause);
  if (o.shown.empty() && o.group_rank == 0 && code != kExitInterrupted) {
    report::record_failed_run(o.failure_root + "/output/data/summary.json", shown(program(o)),
                              why.substr(0, why.find('\n')), code, started);
  }
}

// How this host's ranks are watched: a stop or a failure ends them, not a clock.
SuperviseOptions supervise_options(const RankGroupOptions& o, bool& signalled) {
  SuperviseOptions sup;
  sup.timeout_s = 1e9;  // training takes as long as it takes; a stop or a failure ends it
  sup.grace_s = o.grace_s;
  sup.tail_lines = o.tail_lines;
  sup.out = o.out;
  sup.signalled = &signalled;
  return sup;
}

}  // namespace

int job_exit_code(const std::vector<ExitStatus>& ranks) {
  const ExitStatus* s = culprit(ranks);
  return s == nullptr ? 0 : code_of(*s);
}

std::string failure_report(const std::vector<ExitStatus>& ranks, const std::vector<std::string>& argv) {
  const ExitStatus* s = culprit(ranks);
  if (s == nullptr) return "";
  std::string head = fmt::format("{} {}{}: {}\n", s->name, s->describe(),
                                 s->stopped_others && ranks.size() > 1 ? ", so the other ranks were stopped" : "",
                                 printable(shown(argv), 300));
  if (s->tail.empty()) return head + "(it printed nothing)\n";
  // SageMaker shows the first 1,024 characters of output/failure: its last lines that fit,
  // each printable (escape sequences, carriage returns and binary shown, not replayed).
  std::vector<std::string> lines;
  size_t room = kFailureChars - std::min(kFailureChars, head.size() + 32);
  for (auto it = s->tail.rbegin(); it != s->tail.rend(); ++it) {
    std::string line = printable(*it, 300);
    if (line.size() + 1 > room) break;
    room -= line.size() + 1;
    lines.insert(lines.begin(), std::move(line));
  }
  std::string text = head + fmt::format("its last {}:\n", counted(lines.size(), "line"));
  for (const auto& line : lines) text += line + "\n";
  return text;
}

int visible_gpus(int torch_count, int device_files, const std::optional<std::string>& cuda_visible_devices) {
  if (torch_count > 0) return torch_count;
  if (!cuda_visible_devices) return device_files;
  // CUDA takes the listed devices up to the first that is not one ("-1", "", a typo).
  int listed = 0;
  for (const std::string& id : split_trimmed(*cuda_visible_devices, ',')) {
    const bool index = !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
    if (!index && !id.starts_with("GPU-") && !id.starts_with("MIG-")) break;
    ++listed;
  }
  return std::min(device_files, listed);
}

int host_gpus() {
  int files = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") && name.find_first_not_of("0123456789", 6) == std::string::npos) {
      ++files;
    }
  }
  return visible_gpus(training::cuda_device_count(), files, process_env("CUDA_VISIBLE_DEVICES"));
}

int run_rank_group(const RankGroupOptions& given) {
  RankGroupOptions o = given;
  const double started = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const HostRelay relay(o);
  const RankPlace first = RankPlace::on_host(o.group_rank, o.groups, 0, o.procs);
  spdlog::info("starting {} (ranks {}..{} of {}) of {}, rendezvous at {}:{}", counted(o.procs, "process", "processes"),
               first.rank, first.rank + o.procs - 1, first.world, shown(program(o)), o.context.master_addr,
               o.context.master_port);
  JobChannel channel(o, gate_options(o));
  unblock_stop_signals();  // supervise() forwards them to the ranks from a handler
  bool signalled = false;
  SuperviseOptions sup = supervise_options(o, signalled);
  // Another host's failure stops this host's ranks; this host's own is told at once.
  sup.stop_when = [&channel] {
    const std::optional<JobEnd> e = channel.ended_elsewhere();
    return e ? e->reason : std::string();
  };
  bool cause = false;  // this host's output/failure names the job's first cause
  sup.on_failure = [&](const ExitStatus& rank) {
    const std::vector<ExitStatus> culprit{rank};
    if (records(o)) {
      cause = report::write_failure(o.failure_root, o.context.host, failure_report(culprit, program(o)));
    }
    channel.failing(job_exit_code(culprit), failed_rank(culprit, o.context.host));
  };
  const std::vector<ExitStatus> ranks = supervise(rank_specs(o), sup);
  const std::optional<JobEnd> elsewhere = channel.ended_elsewhere();
  const int own = job_exit_code(ranks);
  const int code = elsewhere ? elsewhere->code : own;
  if (code != 0) {
    const std::string why = host_failure(o, ranks, signalled, elsewhere);
    spdlog::error("{} failed (exit {}): {}", shown(program(o)), code, why.substr(0, why.find('\n')));
    record_host_failure(o, code, why, cause && !elsewhere, started);
  } else {
    spdlog::info("every rank exited 0");
  }
  if (channel.gate()) return release_after_peers(o, *channel.gate(), code);
  release(o, code);
  if (channel.reporter()) report_end(*channel.reporter(), code, failed_rank(ranks, o.context.host));
  return code;
}

}  // namespace tandem::launch
