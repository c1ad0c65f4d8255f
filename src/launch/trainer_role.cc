#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/signals.h"
#include "tandem/common/text.h"
#include "tandem/data/batching/thread_pool.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/feed/sample_audit.h"
#include "tandem/launch/run.h"
#include "tandem/report/summary.h"
#include "tandem/report/run_log.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"
#include "tandem/transport/grpc_runtime.h"
#include "trainer_records.h"

namespace tandem::launch {
namespace {

// SIGTERM and SIGINT: set the stop flag and end a wait in the rank's feed at once (the
// ranks of a group then agree on the step to stop at through their next gradient sync).
// Before the first step nothing can be lost, but some waits cannot be interrupted
// (c10d's rendezvous waits up to --dist-timeout): a stop then ends the process.
class StopOnSignal {
 public:
  StopOnSignal()
      : watcher_([this](int signo) {
          spdlog::warn("received {}: stopping training", signo == SIGTERM ? "SIGTERM" : "SIGINT");
          stop_ = true;
          {
            std::lock_guard lock(mu_);
            if (feed_) feed_->interrupt();
          }
          if (starting_) exit_soon();
        }) {
    starting_ = true;
  }
  const std::atomic<bool>& stop() const { return stop_; }
  // From here on a stop is handled by the training loop.
  void training_starts() { starting_ = false; }

  // While the returned guard lives, a stop interrupts `feed`.
  auto interrupts(feed::RankFeed& feed) {
    std::lock_guard lock(mu_);
    feed_ = &feed;
    if (stop_) feed.interrupt();
    auto detach = [this](feed::RankFeed*) {
      std::lock_guard l(mu_);
      feed_ = nullptr;
    };
    return std::unique_ptr<feed::RankFeed, decltype(detach)>(&feed, detach);
  }

 private:
  // Process-wide, since the timer thread may outlive this object.
  static inline std::atomic<bool> starting_{false};
  static void exit_soon() {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      if (!starting_) return;
      spdlog::warn("stopped while starting (before any step): exiting");
      spdlog::default_logger()->flush();
      std::_Exit(kExitInterrupted);
    }).detach();
  }

  std::atomic<bool> stop_{false};
  std::mutex mu_;
  feed::RankFeed* feed_ = nullptr;  // GUARDED_BY(mu_)
  SignalWatcher watcher_;           // last: its thread goes first
};

// What one rank runs with, derived once the dataset is known.
struct RankPlan {
  int64_t steps = 0;          // the run's last step (from --epochs when set)
  uint64_t steps_per_epoch = 0;
  int torch_threads = 1;
  int local_threads = 0;      // this process's own preprocessing threads
};

// Threads for LibTorch and for in-process preprocessing, without oversubscribing.
// On GPU the loop needs few CPU threads and the rest preprocess; on CPU training owns
// the cores unless nobody else makes data. Ranks on one host share its cores. A rank
// without the data preprocesses nothing.
void split_cores(const TrainerOptions& opts, const feed::RankFeed& feed, int local_ranks, RankPlan& plan) {
  const int cores = std::max(data::available_cores() / std::max(local_ranks, 1), 1);
  const bool has_remote = !feed.options().workers.empty();
  int local = opts.local_workers;
  if (local < 0) {
    if (training::cuda_device_count() > 0) local = std::max(cores - 2, 1);
    else local = has_remote ? 0 : std::max(cores / 2, 1);
  }
  if (!feed.local_dataset()) local = 0;
  plan.local_threads = local;
  plan.torch_threads = opts.train_threads > 0 ? opts.train_threads : std::max(cores - local, 1);
}

// As the sampler cuts epochs: whole global batches; the remainder waits for the next.
void steps_from_epochs(const TrainerOptions& opts, const data::DatasetInfo& info, const training::DistInfo& dist,
                       RankPlan& plan) {
  plan.steps_per_epoch = info.size / (static_cast<uint64_t>(opts.batch_size) * static_cast<uint64_t>(dist.world));
  plan.steps = opts.steps;
  if (opts.epochs <= 0) return;
  if (plan.steps_per_epoch == 0) {
    throw ConfigError("--epochs needs at least one global batch per epoch, but dataset " + info.name + " has " +
                      std::to_string(info.size) + " samples for a global batch of " +
                      std::to_string(opts.batch_size * dist.world) + ": lower --batch-size or use --steps");
  }
  plan.steps = opts.epochs * static_cast<int64_t>(plan.steps_per_epoch);
  if (dist.rank == 0) {
    spdlog::info("{} of {}: {}", counted(opts.epochs, "epoch"), counted(plan.steps_per_epoch, "step"),
                 counted(plan.steps, "step"));
  }
}

RankPlan plan_rank(const TrainerOptions& opts, const feed::RankFeed& feed, const training::DistInfo& dist) {
  RankPlan plan;
  steps_from_epochs(opts, feed.info(), dist, plan);
  split_cores(opts, feed, dist.local_world, plan);
  return plan;
}

// The held-out set: same data settings, the test split and its default (eval) pipeline.
std::shared_ptr<const data::Dataset> eval_dataset(const Settings& settings, const data::DatasetInfo& train) {
  if (settings.trainer.eval_data.empty()) return nullptr;
  DataOptions e = settings.data;
  e.data = settings.trainer.eval_data;
  e.split = "test";
  e.pipeline.clear();
  auto eval = data::make_dataset(e);
  if (eval->info().sample_shape != train.sample_shape || eval->info().num_classes != train.num_classes) {
    throw ConfigError("--eval-data " + e.data + " gives samples of another shape or class count than --data " +
                      settings.data.data + ": evaluate on data prepared like the training set");
  }
  return eval;
}

feed::FeedOptions rank_feed_options(const Settings& settings, const std::vector<std::string>& workers,
                                    const training::DistInfo& dist) {
  feed::FeedOptions o = feed::feed_options(settings, workers, dist.rank, dist.world);
  // A host without a copy of the data (a SageMaker channel sent to the data group only)
  // learns the dataset from its workers, unless it was asked to preprocess.
  o.may_learn = settings.trainer.local_workers <= 0;
  return o;
}

// Trains on the feed; every batch is recorded in `audit` when there is one.
training::TrainReport train(training::Trainer& trainer, feed::RankFeed& feed, feed::SampleAudit* audit,
                            const std::atomic<bool>& stop, LiveRecords& live) {
  return trainer.run(
      [&] {
        std::optional<data::Batch> b = feed.next();
        if (b && audit) audit->record(*b);
        return b;
      },
      stop, {}, live.observer(feed.scheduler()));
}

}  // namespace

int run_trainer(const Settings& settings, const std::vector<std::string>& worker_targets, const std::string& host,
                const cluster::Cluster* cluster) {
  StopOnSignal signals;
  transport::keep_grpc_initialised();
  int rank = 0;
  std::string out;  // where this trainer writes (output_root.h); "" until known, or nowhere
  try {
    const training::DistInfo dist = training::dist_info(settings.launcher, settings.trainer);
    rank = dist.rank;
    if (dist.local_rank == 0) spdlog::info("trainer {}: {}", host, training::describe(training::torch_runtime()));
    feed::RankFeed feed(rank_feed_options(settings, worker_targets, dist), signals.stop());
    const RankPlan plan = plan_rank(settings.trainer, feed, dist);
    training::set_torch_threads(plan.torch_threads);
    TrainerOptions opts = settings.trainer;
    opts.steps = plan.steps;
    const RunFiles files = run_files(settings, dist.rank);
    out = files.root;
    training::Trainer trainer(opts, feed.info(), dist, files.paths, eval_dataset(settings, feed.info()));
    signals.training_starts();
    const auto interrupts = signals.interrupts(feed);
    feed.start(static_cast<uint64_t>(plan.steps), static_cast<uint64_t>(trainer.start_step()), plan.local_threads);
    spdlog::info("trainer {} rank {}/{} on {}: {}, {}, {}", host, dist.rank, dist.world, trainer.device(),
                 counted(worker_targets.size(), "data worker"), counted(plan.local_threads, "local preprocessing thread"),
                 counted(plan.torch_threads, "torch thread"));
    std::unique_ptr<feed::SampleAudit> audit;
    if (opts.audit_samples) audit = std::make_unique<feed::SampleAudit>(feed.sampler(), feed.info().size);
    LiveRecords live(files, dist.rank, trainer.start_step() > 0, plan.steps_per_epoch, settings.quiet);
    const training::TrainReport result = train(trainer, feed, audit.get(), signals.stop(), live);
    feed.close();
    // Every rank's audit goes to rank 0, which reports the whole job's coverage.
    std::vector<std::string> audits;
    if (audit) audits = trainer.gather("sample-audit", audit->report().dump());
    if (dist.rank == 0) {
      RunFacts facts{settings, feed, dist, cluster, plan.local_threads, plan.steps_per_epoch, opts.batch_size};
      write_run_records(files, live, result, facts, audits);
      // Every rank has finished its last step (run() ends with a barrier): now the workers may go.
      feed.release_workers(result.interrupted ? "trainer interrupted" : "training finished");
    }
    return result.interrupted ? kExitInterrupted : kExitOk;
  } catch (const Interrupted& e) {
    spdlog::warn("trainer {} rank {} stopped before training: {}", host, rank, e.what());
    if (rank == 0) feed::release_workers(worker_targets, settings.security, "trainer interrupted");
    return kExitInterrupted;
  } catch (const std::exception& e) {
    spdlog::error("trainer {} rank {} failed: {}", host, rank, e.what());
    report::write_failure(out.empty() ? settings.cluster.sagemaker_root : out,
                          std::string("trainer failed: ") + e.what());
    feed::release_workers(worker_targets, settings.security, "trainer failed");
    return kExitFailed;
  }
}

}  // namespace tandem::launch
