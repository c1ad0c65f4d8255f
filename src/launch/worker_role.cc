#include <chrono>
#include <csignal>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/exit_codes.h"
#include "tandem/common/exit_deadline.h"
#include "tandem/common/signals.h"
#include "tandem/common/text.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/launch/release_gate.h"
#include "tandem/launch/run.h"
#include "tandem/report/summary.h"
#include "tandem/transport/byte_budget.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/transport/live_metrics.h"
#include "tandem/transport/worker_server.h"

namespace tandem::launch {
namespace {

// Users' code must be deterministic: a dataset whose samples differ when made twice is
// one loud warning (the trainers' summaries list it too), an error under
// --require-deterministic.
void check_determinism(const data::Dataset& dataset, const DataOptions& opts) {
  const std::string problem = dataset.determinism_problem();
  if (problem.empty()) return;
  if (opts.require_deterministic) throw ConfigError(problem + " (--require-deterministic)");
  spdlog::warn("{}; --require-deterministic makes this an error", problem);
}

// The first SIGTERM: with --drain this worker alone leaves the job (it tells its trainers,
// answers what they asked for, exits); else the whole job is stopping, and the worker
// serves a connected trainer a little longer, so that it can finish its step and checkpoint.
void first_term(transport::WorkerServer& s, const WorkerOptions& o, const std::string& host) {
  if (o.drain) {
    spdlog::info("received SIGTERM with --drain: leaving the job; the trainers are told, what they asked for is "
                 "answered (at most {} s), then the worker exits", o.term_grace_s);
    s.drain(o.term_grace_s, "its host " + host + " is leaving (SIGTERM, --drain)");
  } else {
    spdlog::info("received SIGTERM: stopping the data worker once no trainer is connected (at most {} s)",
                 o.term_grace_s);
    s.stop_when_idle(o.term_grace_s);
  }
}

// The worker's exit code once its server stopped for `why`, said in the log (and in
// output/failure when no trainer came, or none stayed).
int exit_code_for(transport::StopReason why, const Settings& settings, const std::string& host) {
  if (why == transport::StopReason::kUnclaimed) {
    const std::string reason = fmt::format(
        "no trainer of this job called data worker {} within {:g} s of its start (--claim-timeout): the trainer "
        "failed before it could, or it was given other workers (--workers, the host map) or another token or job "
        "name; exiting so that the job's CPU nodes are not held",
        host, settings.worker.claim_timeout_s);
    spdlog::error("{}", reason);
    report::write_failure(settings.cluster.sagemaker_root, host, reason);
    return kExitPeer;
  }
  if (why == transport::StopReason::kIdle) {
    const std::string reason = "no trainer contacted data worker " + host + " for " +
                               std::to_string(static_cast<int>(settings.worker.idle_timeout_s)) +
                               " s (--idle-timeout): the trainer is gone or never started; exiting";
    spdlog::error("{}", reason);
    report::write_failure(settings.cluster.sagemaker_root, host, reason);
    return kExitPeer;
  }
  // Stopped by SIGTERM before its trainer released it (and not leaving alone, --drain):
  // the job was interrupted, and a scheduler may start this worker again.
  if (why == transport::StopReason::kStopped && !settings.worker.drain) {
    spdlog::info("data worker {} exiting: stopped before its trainer released it (exit {}, interrupted)", host,
                 kExitInterrupted);
    return kExitInterrupted;
  }
  spdlog::info("data worker {} exiting", host);
  return kExitOk;
}

}  // namespace

namespace {

// A pool's job's dataset: its data options from `job_data`, made as the worker's own is.
transport::DatasetFor pool_datasets(const Settings& settings, const JobData& job_data, const DataRole& role) {
  if (settings.worker.pool_jobs.empty() || !job_data) return {};
  return [&settings, job_data, role](const std::string& json) {
    DataOptions d = job_data(json);
    if (d.python_procs == 0) d.python_procs = settings.worker.threads;
    transport::PoolDataset out{data::make_dataset(d, role), data::wire_dtype(d)};
    check_determinism(*out.dataset, d);
    spdlog::info("a job's dataset {}: '{}' ({}, fingerprint {})", json, out.dataset->info().name,
                 counted(out.dataset->info().size, "sample"), out.dataset->info().fingerprint);
    return out;
  };
}

}  // namespace

int run_worker(const Settings& settings, const std::string& host, const JobData& job_data) {
  std::atomic<transport::WorkerServer*> live{nullptr};
  std::atomic<bool> signalled{false};
  // A second signal, or SIGINT, stops at once.
  SignalWatcher signals([&](int signo) {
    const bool again = signalled.exchange(true);
    auto* s = live.load();
    if (!s) return;
    if (again || signo == SIGINT) {
      spdlog::info("received {}: stopping the data worker", signal_name(signo));
      s->stop();
    } else {
      first_term(*s, settings.worker, host);
    }
  });
  transport::keep_grpc_initialised();
  DataOptions data = settings.data;  // a Python dataset's processes default to the worker's threads
  if (data.python_procs == 0) data.python_procs = settings.worker.threads;
  // --max-inflight-mb, split once (byte_budget.h): the dataset's share, then the batches'.
  WorkerOptions worker = settings.worker;
  const transport::InflightSplit split = transport::split_inflight(worker.max_inflight_mb);
  worker.max_inflight_mb = static_cast<int64_t>(split.total >> 20);
  const DataRole role{.python_shm_bytes = split.python_shm, .read_ahead_bytes = split.read_ahead};
  auto dataset = data::make_dataset(data, role);
  check_determinism(*dataset, settings.data);
  if (dataset->shared_memory_bytes() > 0) {
    spdlog::info("its Python processes may map {} MiB of shared memory, half of --max-inflight-mb {}",
                 dataset->shared_memory_bytes() >> 20, worker.max_inflight_mb);
  }
  transport::WorkerServer server(dataset, worker, host, data::wire_dtype(settings.data), settings.security,
                                 pool_datasets(settings, job_data, role));
  const int port = settings.worker.port >= 0 ? settings.worker.port : settings.cluster.worker_port;
  const int bound = server.start(settings.worker.bind + ":" + std::to_string(port));
  live = &server;
  auto page = std::make_shared<transport::WorkerMetrics>();
  const std::string& metrics_bind = settings.cluster.metrics_bind;
  const auto metrics = transport::serve_metrics(settings.cluster.metrics_port,
                                                metrics_bind.empty() ? settings.worker.bind : metrics_bind,
                                                [&server, page] { return page->page(server.stats()); });
  if (signalled) first_term(server, settings.worker, host);
  spdlog::info("data worker {} serving '{}' ({}, fingerprint {}) on port {} with {}", host, dataset->info().name,
               counted(dataset->info().size, "sample"), dataset->info().fingerprint, bound,
               counted(server.threads(), "thread"));
  const transport::StopReason why = server.wait();
  // Ending is bounded: a reading thread stuck on a hung file system would otherwise hold
  // the process in the dataset's destructor for good, deaf to SIGTERM.
  ExitIfStuck stuck(kEndingS, kExitPeer, "data worker " + host);
  live = nullptr;
  return stuck.ending(exit_code_for(why, settings, host));
}

int run_worker_host(const Settings& settings, const std::string& host, const std::string& trainer_address) {
  try {
    return run_worker(settings, host);
  } catch (const ConfigError& e) {
    ReportDoneOptions to;
    to.address = trainer_address;
    to.port = release_port(settings.launch, settings.trainer.master_port);
    to.wait_s = kTellTrainersS;
    to.security = settings.security;
    spdlog::info("telling the first trainer host ({}:{}) that this data worker host cannot serve", to.address, to.port);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(kTellTrainersS);
    ReleaseReporter(host, to).report(kExitConfig, [until] { return std::chrono::steady_clock::now() >= until; },
                                     "data worker host " + host + " cannot serve: " + e.what());
    throw;
  }
}

}  // namespace tandem::launch
