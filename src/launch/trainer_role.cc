#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <csignal>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/signals.h"
#include "tandem/common/text.h"
#include "tandem/data/convert.h"
#include "tandem/data/sampler.h"
#include "tandem/data/thread_pool.h"
#include "tandem/feed/local_source.h"
#include "tandem/feed/sample_audit.h"
#include "tandem/launch/roles.h"
#include "tandem/cluster/cluster.h"
#include "tandem/report/html_report.h"
#include "tandem/report/plan_inputs.h"
#include "tandem/report/run_log.h"
#include "tandem/report/summary.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/transport/remote_worker.h"

namespace tandem::launch {
namespace {

// Threads for LibTorch and for in-process preprocessing, without oversubscribing.
// On GPU the loop needs few CPU threads and the rest preprocess; on CPU training owns
// the cores unless nobody else makes data. Ranks on one host share its cores.
std::pair<int, int> split_cores(const TrainerOptions& opts, bool has_remote, bool cuda, int local_ranks) {
  const int cores = std::max(data::available_cores() / std::max(local_ranks, 1), 1);
  int local = opts.local_workers;
  if (local < 0) {
    if (cuda) local = std::max(cores - 2, 1);
    else local = has_remote ? 0 : std::max(cores / 2, 1);
  }
  int torch_threads = opts.train_threads > 0 ? opts.train_threads : std::max(cores - local, 1);
  return {torch_threads, local};
}

struct Connection {
  std::unique_ptr<transport::RemoteWorker> worker;
  bool ready = false;
};

// Connects to the workers. Training starts as soon as one source can serve (a worker
// that answers, or this host's own threads); workers that do not answer yet join in the
// background when they do. With no source at all it waits up to --connect-timeout.
std::vector<Connection> connect_workers(const std::vector<std::string>& targets, const Settings& settings,
                                        const data::DatasetInfo& info, const std::atomic<bool>& stop, bool local) {
  const TrainerOptions& opts = settings.trainer;
  if (settings.security.token.empty() &&
      std::any_of(targets.begin(), targets.end(), [](const auto& t) { return !transport::is_loopback(t); })) {
    spdlog::warn("THE DATA PLANE IS OPEN: no token is set, so anyone on the network can feed this trainer batches "
                 "or stop its workers. Set TANDEM_TOKEN (or --token-file) on every host of the job (docs/security.md)");
  }
  std::vector<Connection> out;
  for (const std::string& t : targets) out.push_back({std::make_unique<transport::RemoteWorker>(t, settings.security)});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(opts.connect_timeout_s);
  for (;;) {
    for (auto& c : out) {
      if (c.ready) continue;
      try {
        c.worker->wait_ready(1.0, &stop);
      } catch (const NetworkError&) {
        continue;
      }
      c.worker->check_serves(info, 10);
      c.ready = true;
    }
    const bool any = std::any_of(out.begin(), out.end(), [](const Connection& c) { return c.ready; });
    if (std::all_of(out.begin(), out.end(), [](const Connection& c) { return c.ready; })) return out;
    if (any || local) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw NetworkError("no data worker answered within --connect-timeout " +
                         std::to_string(static_cast<int>(opts.connect_timeout_s)) + " s (" + std::to_string(out.size()) +
                         " tried, e.g. " + out.front().worker->target() +
                         "): check that they run and listen on that port, or raise --connect-timeout");
    }
  }
  for (const auto& c : out) {
    if (!c.ready) spdlog::warn("data worker {} does not answer yet: training starts without it, it joins when it does",
                               c.worker->target());
  }
  return out;
}

// The held-out set: same data settings, the test split and its default (eval) pipeline.
std::shared_ptr<const data::Dataset> eval_dataset(const Settings& settings, const data::DatasetInfo& train) {
  DataOptions e = settings.data;
  e.data = settings.trainer.eval_data;
  e.split = "test";
  e.pipeline.clear();
  e.sagemaker_root = settings.cluster.sagemaker_root;
  auto eval = data::make_dataset(e);
  if (eval->info().sample_shape != train.sample_shape || eval->info().num_classes != train.num_classes) {
    throw ConfigError("--eval-data " + e.data + " gives samples of another shape or class count than --data " +
                      settings.data.data + ": evaluate on data prepared like the training set");
  }
  return eval;
}

// The deadline of the calls that end a run: a healthy worker answers in milliseconds.
constexpr double kReleaseDeadlineS = 3;

// Samples that were substituted under --on-bad-sample skip, here and on every worker,
// and what each worker is (asked all at once, so a hung worker costs one short deadline).
std::vector<report::WorkerFacts> ask_workers(nlohmann::json& summary, const data::Dataset& local,
                                             const std::vector<Connection>& workers,
                                             const cluster::Cluster& cluster) {
  nlohmann::json files = local.skipped();
  uint64_t count = local.skipped_count();
  std::vector<report::WorkerFacts> facts;
  std::vector<std::future<transport::WorkerInfo>> answers;
  for (const auto& c : workers) {
    answers.push_back(std::async(std::launch::async, [&w = *c.worker] { return w.info(kReleaseDeadlineS); }));
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    report::WorkerFacts f{workers[i].worker->target(), "", "", 0};
    try {
      const transport::WorkerInfo wi = answers[i].get();
      for (const auto& s : wi.skipped) files.push_back(wi.host + ": " + s);
      count += wi.skipped_count;
      f.host = wi.host;
      f.threads = wi.threads;
      for (const auto& g : cluster.groups) {
        if (std::find(g.hosts.begin(), g.hosts.end(), wi.host) != g.hosts.end()) f.instance_type = g.instance_type;
      }
    } catch (const std::exception& e) {
      spdlog::warn("could not ask {} which samples it skipped: {}", workers[i].worker->target(), e.what());
    }
    facts.push_back(std::move(f));
  }
  summary["skipped_samples"] = count;
  summary["skipped_files"] = files;
  return facts;
}

}  // namespace

int run_trainer(const Settings& settings, const std::vector<std::string>& worker_targets, const std::string& host) {
  std::atomic<bool> stop{false};
  // A stop closes the scheduler, which ends a wait for a batch at once; ranks of a group
  // then agree on the step to stop at through their next gradient sync.
  std::mutex feed_mu;
  feed::Scheduler* closable = nullptr;  // GUARDED_BY(feed_mu)
  // Before the first step nothing can be lost, but some waits cannot be interrupted
  // (c10d's rendezvous waits up to --dist-timeout): a stop then ends the process.
  // Process-wide, since the timer thread may outlive this call.
  static std::atomic<bool> starting;
  starting = true;
  SignalWatcher signals([&](int signo) {
    spdlog::warn("received {}: stopping training", signo == SIGTERM ? "SIGTERM" : "SIGINT");
    stop = true;
    {
      std::lock_guard lock(feed_mu);
      if (closable) closable->close();
    }
    if (starting) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(3));
        if (!starting) return;
        spdlog::warn("stopped while starting (before any step): exiting");
        spdlog::default_logger()->flush();
        std::_Exit(kExitInterrupted);
      }).detach();
    }
  });
  transport::keep_grpc_initialised();
  TrainerOptions opts = settings.trainer;  // --epochs becomes steps once the dataset is known
  const std::string& root = settings.cluster.sagemaker_root;
  std::vector<Connection> workers;
  // Whatever happens, the workers hear that training is over, so none waits in vain.
  // All at once, so that hung workers cost one deadline, not one each.
  auto release_workers = [&](const std::string& reason) {
    std::vector<std::thread> calls;
    for (const std::string& target : worker_targets) {
      calls.emplace_back([&, target] { transport::RemoteWorker(target, settings.security).shutdown(reason, kReleaseDeadlineS); });
    }
    for (auto& t : calls) t.join();
  };
  int rank = 0;
  try {
    const training::DistInfo dist = training::dist_from_env(opts);
    rank = dist.rank;
    if (dist.local_rank == 0) spdlog::info("trainer {}: {}", host, training::describe(training::torch_runtime()));
    auto dataset = data::make_dataset(settings.data);
    const data::DatasetInfo& info = dataset->info();
    // As the sampler cuts epochs: whole global batches; the remainder waits for the next epoch.
    const uint64_t per_epoch = info.size / (static_cast<uint64_t>(opts.batch_size) * static_cast<uint64_t>(dist.world));
    if (opts.epochs > 0) {
      if (per_epoch == 0) {
        throw ConfigError("--epochs needs at least one global batch per epoch, but dataset " + info.name + " has " +
                          std::to_string(info.size) + " samples for a global batch of " +
                          std::to_string(opts.batch_size * dist.world) + ": lower --batch-size or use --steps");
      }
      opts.steps = opts.epochs * static_cast<int64_t>(per_epoch);
      if (dist.rank == 0) {
        spdlog::info("{} epochs of {} steps: {} steps", opts.epochs, per_epoch, opts.steps);
      }
    }
    const auto [torch_threads, local] =
        split_cores(opts, !worker_targets.empty(), training::cuda_device_count() > 0, dist.local_world);
    training::set_torch_threads(torch_threads);
    if (worker_targets.empty() && local == 0) {
      throw ConfigError("no data source: there are no data workers and --local-workers is 0; "
                        "set --local-workers or add a worker group");
    }
    std::shared_ptr<const data::Dataset> eval;
    if (!opts.eval_data.empty()) eval = eval_dataset(settings, info);
    const bool has_root = std::filesystem::is_directory(root);
    if (!has_root && dist.rank == 0) {
      spdlog::warn("no SageMaker root at {}: checkpoints and the final model are not written "
                   "(point --sagemaker-root at a directory to keep them)", root);
    }
    training::RunPaths paths;
    if (has_root) paths = {root + "/checkpoints", root + "/model"};
    training::Trainer trainer(opts, info, dist, paths, eval);
    starting = false;  // from here on a stop is handled by the training loop
    data::Sampler sampler(info.size, opts.batch_size, settings.data.seed, dist.rank, dist.world);
    feed::Scheduler scheduler([&](uint64_t seq) { return sampler.request(seq); },
                              {static_cast<uint64_t>(opts.steps), opts.prefetch, opts.batch_timeout_s,
                               static_cast<uint64_t>(trainer.start_step())});
    spdlog::info("trainer {} rank {}/{} on {}: {} data workers, {} local preprocessing threads, {} torch threads",
                 host, dist.rank, dist.world, trainer.device(), worker_targets.size(), local, torch_threads);
    workers = connect_workers(worker_targets, settings, info, stop, local > 0);
    for (auto& c : workers) {
      c.worker->start(scheduler, scheduler.add_source(c.worker->target(), opts.inflight), &info, !c.ready);
    }
    std::unique_ptr<feed::LocalSource> local_source;
    if (local > 0) local_source = std::make_unique<feed::LocalSource>(scheduler, dataset, local, data::wire_dtype(settings.data));
    training::TrainReport result;
    {
      std::lock_guard lock(feed_mu);
      closable = &scheduler;
      if (stop) scheduler.close();
    }
    auto unhook = [&] {
      std::lock_guard lock(feed_mu);
      closable = nullptr;
    };
    std::unique_ptr<feed::SampleAudit> audit;
    if (opts.audit_samples) audit = std::make_unique<feed::SampleAudit>(sampler, info.size);
    // Rank 0 keeps metrics.jsonl next to the summary and, on a terminal, shows a status line.
    const std::string summary_path = opts.summary_json.empty() ? root + "/output/data/summary.json" : opts.summary_json;
    const bool keep_files = has_root || !opts.summary_json.empty();
    std::unique_ptr<report::MetricsLog> metrics;
    std::unique_ptr<report::StatusLine> status;
    if (dist.rank == 0) {
      if (keep_files) {
        const std::filesystem::path dir = std::filesystem::path(summary_path).parent_path();
        if (!dir.empty()) std::filesystem::create_directories(dir);
        metrics = std::make_unique<report::MetricsLog>((dir / "metrics.jsonl").string(), trainer.start_step() > 0,
                                                       per_epoch);
      }
      if (report::StatusLine::wanted()) status = std::make_unique<report::StatusLine>();
    }
    training::RunObserver observer;
    observer.log_lines = !status;
    observer.on_log = [&](const training::LogPoint& p) {
      if (metrics) metrics->write(p, scheduler.stats());
      if (status) status->metrics(p);
    };
    if (status) {
      observer.on_progress = [&](int64_t s, int64_t t, const char* phase) { status->progress(s, t, phase); };
      observer.on_eval_progress = [&](int64_t done, int64_t total) { status->eval_progress(done, total); };
    }
    try {
      result = trainer.run(
          [&] {
            std::optional<data::Batch> b = scheduler.next();
            if (b && audit) audit->record(*b);
            return b;
          },
          stop, {}, observer);
      status.reset();
    } catch (...) {
      status.reset();
      unhook();
      scheduler.close();
      for (auto& c : workers) c.worker->stop();  // their threads use the scheduler
      throw;
    }
    unhook();
    scheduler.close();
    for (auto& c : workers) c.worker->stop();
    local_source.reset();
    // Every rank's audit goes to rank 0, which reports the whole job's coverage.
    std::vector<std::string> audits;
    if (audit) audits = trainer.gather("sample-audit", audit->report().dump());
    if (dist.rank == 0) {
      nlohmann::json summary = report::make_summary(result, scheduler.stats());
      cluster::Cluster cluster;
      try {
        cluster = cluster::discover(settings.cluster);
      } catch (const std::exception& e) {
        spdlog::warn("instance types unknown for the plan: {}", e.what());
      }
      const auto facts = ask_workers(summary, *dataset, workers, cluster);
      summary["throughput"] = report::throughput(result);
      summary["batch_size"] = opts.batch_size;
      summary["global_batch"] = opts.batch_size * dist.world;
      summary["plan_inputs"] = report::plan_inputs(result, scheduler.stats(), facts, cluster.current_instance_type,
                                                   std::max(dist.world / std::max(dist.local_world, 1), 1),
                                                   local * std::max(dist.local_world, 1));  // per host
      // Under simulate every "host" shares this machine's CPU: the instance types are labels.
      summary["plan_inputs"]["simulated"] = std::getenv("TANDEM_SIMULATED_HOST") != nullptr;
      if (audit) {
        std::vector<nlohmann::json> reports;
        for (const std::string& a : audits) reports.push_back(nlohmann::json::parse(a));
        summary["sample_audit"] = feed::SampleAudit::merge(reports);
      }
      summary["hedged_requests"] = scheduler.hedged();
      summary["steps_per_epoch"] = per_epoch;
      summary["epochs"] = per_epoch ? static_cast<double>(result.start_step + result.steps) / per_epoch : 0.0;
      std::string path = summary_path;
      if (metrics) summary["metrics_file"] = metrics->path();
      if (keep_files) {
        report::write_file_atomically(path, summary.dump(2) + "\n");
        // The report beside it (a plan needs the instance types and a price table: the
        // page says so when it cannot make one). A report is a convenience: never fatal.
        try {
          spdlog::info("report in {}", report::write_run_report(path));
        } catch (const std::exception& e) {
          spdlog::warn("no report.html: {} (tandem report {} makes one later)", e.what(), path);
        }
      }
      else path = "(not written: no SageMaker root; use --summary-json)";
      spdlog::info("training {}: {} steps, loss {:.4f} -> {:.4f}, {:.1f} samples/s; summary in {}",
                   result.interrupted ? "interrupted" : "finished", result.steps, result.first_loss, result.final_loss,
                   result.samples_per_sec * dist.world, path);
      // Every rank has finished its last step (run() ends with a barrier): now the workers may go.
      release_workers(result.interrupted ? "trainer interrupted" : "training finished");
    }
    return result.interrupted ? kExitInterrupted : kExitOk;
  } catch (const Interrupted& e) {
    spdlog::warn("trainer {} rank {} stopped before training: {}", host, rank, e.what());
    for (auto& c : workers) c.worker->stop();
    if (rank == 0) release_workers("trainer interrupted");
    return kExitInterrupted;
  } catch (const std::exception& e) {
    spdlog::error("trainer {} rank {} failed: {}", host, rank, e.what());
    report::write_failure(root, std::string("trainer failed: ") + e.what());
    for (auto& c : workers) c.worker->stop();
    release_workers("trainer failed");
    return kExitFailed;
  }
}

}  // namespace tandem::launch
