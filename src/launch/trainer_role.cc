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
#include "tandem/data/batching/convert.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/batching/thread_pool.h"
#include "tandem/feed/sample_audit.h"
#include "tandem/launch/run.h"
#include "tandem/cluster/cluster.h"
#include "tandem/report/html_report.h"
#include "tandem/report/plan_inputs.h"
#include "tandem/report/run_log.h"
#include "tandem/common/files.h"
#include "tandem/report/summary.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/transport/feed_sources.h"
#include "output_root.h"
#include "worker_links.h"

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

// Lets the signal handler close `feed`'s scheduler (a wait for a batch then ends at
// once) for as long as this lives; declared after the feed, it goes first.
class StopHook {
 public:
  StopHook(std::mutex& mu, transport::FeedSources*& slot, transport::FeedSources& feed,
           const std::atomic<bool>& stop)
      : mu_(mu), slot_(slot) {
    std::lock_guard lock(mu_);
    slot_ = &feed;
    if (stop) feed.scheduler().close();
  }
  ~StopHook() {
    std::lock_guard lock(mu_);
    slot_ = nullptr;
  }
  StopHook(const StopHook&) = delete;
  StopHook& operator=(const StopHook&) = delete;

 private:
  std::mutex& mu_;
  transport::FeedSources*& slot_;
};

}  // namespace

int run_trainer(const Settings& settings, const std::vector<std::string>& worker_targets, const std::string& host) {
  std::atomic<bool> stop{false};
  // A stop closes the scheduler, which ends a wait for a batch at once; ranks of a group
  // then agree on the step to stop at through their next gradient sync.
  std::mutex feed_mu;
  transport::FeedSources* closable = nullptr;  // GUARDED_BY(feed_mu)
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
      if (closable) closable->scheduler().close();
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
  // Whatever happens, the workers hear that training is over, so none waits in vain.
  // All at once, so that hung workers cost one deadline, not one each.
  auto release = [&](const std::string& reason) { release_workers(worker_targets, settings.security, reason); };
  int rank = 0;
  std::string out;  // where this trainer writes (output_root.h); "" until known, or nowhere
  try {
    const training::DistInfo dist = training::dist_info(settings.launcher, opts);
    rank = dist.rank;
    if (dist.local_rank == 0) spdlog::info("trainer {}: {}", host, training::describe(training::torch_runtime()));
    // A host without a copy of the data (a SageMaker channel sent to the data group only)
    // preprocesses nothing and learns the dataset from its workers.
    const bool learn = !worker_targets.empty() && opts.local_workers <= 0 && !data::dataset_is_here(settings.data);
    std::shared_ptr<const data::Dataset> dataset;
    data::DatasetInfo info;
    if (learn) {
      spdlog::info("no copy of --data {} on this host: it preprocesses nothing and learns the dataset from its workers",
                   settings.data.data);
      opts.local_workers = 0;
      info = learn_dataset_from_workers(worker_targets, settings, stop);
    } else {
      dataset = data::make_dataset(settings.data);
      info = dataset->info();
    }
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
        spdlog::info("{} of {}: {}", counted(opts.epochs, "epoch"), counted(per_epoch, "step"),
                     counted(opts.steps, "step"));
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
    out = output_root(settings, dist.rank);
    training::RunPaths paths;
    if (!out.empty()) paths = {out + "/checkpoints", out + "/model"};
    training::Trainer trainer(opts, info, dist, paths, eval);
    starting = false;  // from here on a stop is handled by the training loop
    data::Sampler sampler(info.size, opts.batch_size, settings.data.seed, dist.rank, dist.world);
    // The scheduler and every source: ended in order when it goes, also by an error, and
    // before the sampler they ask for requests.
    transport::FeedSources sources(sampler, feed::SchedulerOptions{static_cast<uint64_t>(opts.steps), opts.prefetch,
                                                                   opts.batch_timeout_s,
                                                                   static_cast<uint64_t>(trainer.start_step())});
    const StopHook hook(feed_mu, closable, sources, stop);
    feed::Scheduler& scheduler = sources.scheduler();
    spdlog::info("trainer {} rank {}/{} on {}: {}, {}, {}", host, dist.rank, dist.world, trainer.device(),
                 counted(worker_targets.size(), "data worker"), counted(local, "local preprocessing thread"),
                 counted(torch_threads, "torch thread"));
    sources.connect_workers(worker_targets, settings.security, info,
                            {.timeout_s = opts.connect_timeout_s, .inflight = opts.inflight, .local = local > 0}, stop);
    if (local > 0) sources.start_local(dataset, local, data::wire_dtype(settings.data));
    training::TrainReport result;
    std::unique_ptr<feed::SampleAudit> audit;
    if (opts.audit_samples) audit = std::make_unique<feed::SampleAudit>(sampler, info.size);
    // Rank 0 keeps metrics.jsonl next to the summary and, on a terminal, shows a status line.
    const std::string summary_path = opts.summary_json.empty() ? out + "/output/data/summary.json" : opts.summary_json;
    const bool keep_files = !out.empty() || !opts.summary_json.empty();
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
      throw;  // the sources end as they go
    }
    sources.close();
    // Every rank's audit goes to rank 0, which reports the whole job's coverage.
    std::vector<std::string> audits;
    if (audit) audits = trainer.gather("sample-audit", audit->report().dump());
    if (dist.rank == 0) {
      nlohmann::json summary = report::make_summary(result, scheduler.stats());
      cluster::Cluster cluster;
      try {
        // Ranks that `tandem launch` started carry torchrun's variables (and
        // TANDEM_GLOO_ADDRESS); the cluster they belong to is the one launch found.
        const bool launched = !settings.launcher.gloo_address.empty();
        cluster = cluster::discover(settings.cluster, [launched](const std::string& name) -> std::optional<std::string> {
          if (launched && (name == "WORLD_SIZE" || name == "RANK" || name == "GROUP_RANK")) return std::nullopt;
          return cluster::process_env(name);
        });
      } catch (const std::exception& e) {
        spdlog::warn("instance types unknown for the plan: {}", e.what());
      }
      const auto facts = ask_workers(summary, dataset.get(), sources.workers(), cluster);
      summary["throughput"] = report::throughput(result);
      summary["batch_size"] = opts.batch_size;
      summary["global_batch"] = opts.batch_size * dist.world;
      summary["settings"] = report::run_settings(settings, info);
      summary["plan_inputs"] = report::plan_inputs(result, scheduler.stats(), facts, cluster.current_instance_type,
                                                   std::max(dist.world / std::max(dist.local_world, 1), 1),
                                                   local * std::max(dist.local_world, 1));  // per host
      // Under simulate every "host" shares this machine's CPU: the instance types are labels.
      summary["plan_inputs"]["simulated"] = settings.launcher.simulated_host;
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
        write_file_atomically(path, summary.dump(2) + "\n");
        // The report beside it (a plan needs the instance types and a price table: the
        // page says so when it cannot make one). A report is a convenience: never fatal.
        try {
          spdlog::info("report in {}", report::write_run_report(path));
        } catch (const std::exception& e) {
          spdlog::warn("no report.html: {} (tandem report {} makes one later)", e.what(), path);
        }
      }
      else path = "(not written: no output folder; use --summary-json or --sagemaker-root)";
      spdlog::info("training {}: {}, loss {:.4f} -> {:.4f}, {:.1f} samples/s; summary in {}",
                   result.interrupted ? "interrupted" : "finished", counted(result.steps, "step"), result.first_loss, result.final_loss,
                   result.samples_per_sec * dist.world, path);
      if (!result.model_file.empty()) spdlog::info("trained model in {}", result.model_file);
      // Every rank has finished its last step (run() ends with a barrier): now the workers may go.
      release(result.interrupted ? "trainer interrupted" : "training finished");
    }
    return result.interrupted ? kExitInterrupted : kExitOk;
  } catch (const Interrupted& e) {
    spdlog::warn("trainer {} rank {} stopped before training: {}", host, rank, e.what());
    if (rank == 0) release("trainer interrupted");
    return kExitInterrupted;
  } catch (const std::exception& e) {
    spdlog::error("trainer {} rank {} failed: {}", host, rank, e.what());
    report::write_failure(out.empty() ? root : out, std::string("trainer failed: ") + e.what());
    release("trainer failed");
    return kExitFailed;
  }
}

}  // namespace tandem::launch
