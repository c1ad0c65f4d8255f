#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "tandem/cluster/cluster.h"
#include "tandem/common/error.h"
#include "tandem/common/signals.h"
#include "tandem/common/text.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/feed/run_summary.h"
#include "tandem/feed/sample_audit.h"
#include "tandem/launch/feed_settings.h"
#include "tandem/launch/run.h"
#include "tandem/plan/prices.h"
#include "tandem/report/output_lock.h"
#include "tandem/report/run_log.h"
#include "tandem/report/summary.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"
#include "tandem/training/trainer_options.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/transport/live_metrics.h"
#include "tandem/common/exit_deadline.h"
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
          spdlog::warn("received {}: stopping training", signal_name(signo));
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

// Tells the workers to exit, unless this rank's rank group (rank_group.h) will: it
// releases the workers and writes output/failure once every rank has ended.
void release(const Settings& settings, const std::vector<std::string>& workers, const std::string& why) {
  if (!settings.launcher.rank_group) feed::release_workers(workers, settings.security, why);
}

// What this rank's host offers, once the feed knows who makes its batches.
training::RankHost rank_host(const feed::RankFeed& feed) {
  return {available_cores(), training::cuda_device_count(), feed.local_dataset() != nullptr,
          !feed.options().workers.empty()};
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
  feed::FeedOptions o = feed_options(settings, workers, dist.rank, dist.world);
  // A host without a copy of the data (a SageMaker channel sent to the data group only)
  // learns the dataset from its workers, unless it was asked to preprocess.
  o.may_learn = settings.trainer.local_workers <= 0;
  return o;
}

// Trains on the feed; every batch is recorded in `audit` when there is one, and counts
// when its step was trained.
training::TrainReport train(training::Trainer& trainer, feed::RankFeed& feed, feed::SampleAudit* audit,
                            const std::atomic<bool>& stop, LiveRecords& live) {
  training::TrainReport report = trainer.run(
      [&] {
        std::optional<data::Batch> b = feed.next();
        if (b && audit) audit->record(*b);
        return b;
      },
      stop, {}, live.observer(feed.scheduler()));
  if (audit) audit->finish(static_cast<uint64_t>(report.start_step + report.steps));
  return report;
}

// --metrics-port on rank 0: its last metrics line and its feed now (null: not asked, or
// another rank, or no records kept).
std::unique_ptr<transport::MetricsServer> serve_live_metrics(const Settings& settings, const LiveRecords& live,
                                                             const feed::RankFeed& feed) {
  if (!live.metrics()) {
    if (settings.cluster.metrics_port >= 0 && feed.options().rank == 0) {
      spdlog::warn("--metrics-port: this run keeps no metrics (no output folder): give --summary-json or --sagemaker-root");
    }
    return nullptr;
  }
  const std::string& bind = settings.cluster.metrics_bind;
  auto page = std::make_shared<transport::TrainerMetrics>();
  return transport::serve_metrics(settings.cluster.metrics_port, bind.empty() ? "0.0.0.0" : bind, [&live, &feed, page] {
    return page->page(live.metrics()->last(), static_cast<double>(feed.scheduler().in_flight()));
  });
}

// --checkpoint-every auto: the job's spot interruptions an hour, from its instances' types
// and the price table (its defaults for types it lacks, or without one).
double job_interruptions(const Settings& settings, const cluster::Cluster* cluster) {
  const LauncherEnv& launcher = settings.launcher;
  const cluster::Cluster c =
      cluster ? *cluster : cluster::cluster_for_plan(settings.cluster, launcher, launcher.rank_group);
  std::vector<std::string> instances;
  for (const cluster::InstanceGroup& g : c.groups) instances.insert(instances.end(), g.hosts.size(), g.instance_type);
  if (instances.empty()) instances.push_back(c.current_instance_type);
  plan::PriceTable prices;
  try {
    prices = plan::load_default_price_table();
  } catch (const ConfigError& e) {
    spdlog::warn("--checkpoint-every auto: {}; using the default spot interruption rate", e.what());
  }
  return plan::job_interruptions_per_hour(prices, instances);
}

// Rank 0's output folder, checked writable and held for this run alone (output_lock.h),
// before the trainer resumes from it.
std::unique_ptr<report::OutputLock> hold_output(const Settings& settings, const RunFiles& files,
                                                const std::string& host, int rank) {
  if (rank != 0) return nullptr;
  check_writable(files);
  return std::make_unique<report::OutputLock>(files.root, report::LockHolder{host, 0, settings.security.job, 0});
}

// A trainer that failed: output/failure (unless a rank group writes it, or `folder` is
// false: another run holds the output folder), and, on rank 0, a summary and report of
// the failure when `summarise` (its run has recorded none); the error is its last line.
void record_failure(const Settings& settings, const RunFiles& written, bool folder, bool summarise,
                    const std::string& host, int rank, const std::exception& e) {
  if (!settings.launcher.rank_group && folder) {
    report::write_failure(written.root.empty() ? settings.cluster.sagemaker_root : written.root, host,
                          std::string("trainer failed: ") + e.what());
  }
  if (summarise) write_failed_run(written, settings, e.what(), exit_code(e));
  spdlog::error("trainer {} rank {} failed: {}", host, rank, e.what());
}

// A run resumed at its last step trains nothing: said in one line, naming the checkpoint.
void say_if_complete(const training::Trainer& trainer, int64_t steps) {
  if (trainer.start_step() < steps) return;
  spdlog::info("checkpoint {} is at step {}, the last of this run's {}: training is complete, nothing to train; "
               "writing the model and a summary (raise --steps or --epochs to train on)",
               trainer.resumed_from(), trainer.start_step(), steps);
}

// A rank's data workers for its first line: those listed, or where they come from (not
// "0 data workers" for a watch file or a DNS name, whose workers come as the run goes).
std::string workers_said(const TrainerOptions& t, size_t listed) {
  if (!t.workers_watch.empty()) return "data workers from the watch file " + printable(t.workers_watch, 200);
  if (!t.worker_service.empty()) return "data workers of " + printable(t.worker_service, 200);
  return counted(listed, "data worker");
}

// Where this run's steps meet the data (data::DataAnchor): at the checkpoint's place
// when it says and was of a dataset of this size, whatever geometry wrote it, so a resume
// at another world size or batch size continues the epoch exactly; else this run's own
// (step 0, or an old checkpoint's step at this geometry). Rank 0 says when the geometry
// changed, and when the checkpoint is at the run's last step already.
data::DataAnchor data_anchor(const training::Trainer& trainer, const data::Sampler& plan, int rank, int64_t steps) {
  if (rank == 0) say_if_complete(trainer, steps);
  const auto step = static_cast<uint64_t>(trainer.start_step());
  const data::DataPosition here = plan.position(step);
  const std::optional<data::DataPosition> then = trainer.resumed_position();
  if (!then || then->dataset_size != here.dataset_size) return data::anchor_at(step, here);
  const std::string shift = feed::resume_shift(*then, here);
  if (rank == 0 && !shift.empty()) {
    spdlog::warn("resuming from {} (step {}) at another world size or batch size: {}", trainer.resumed_from(),
                 trainer.start_step(), shift);
  }
  return data::anchor_at(step, *then);
}

// Anchors the feed's sampler and the trainer's checkpoints at data_anchor's place, and
// returns the run's last step: --epochs ends where the anchored epochs end.
int64_t follow_data(training::Trainer& trainer, feed::RankFeed& feed, int64_t epochs, int rank, int64_t steps) {
  const data::DataAnchor anchor = data_anchor(trainer, feed.sampler(), rank, steps);
  feed.anchor(anchor);
  if (epochs > 0) steps = static_cast<int64_t>(feed.sampler().epoch_start(static_cast<uint32_t>(epochs)));
  trainer.follow(anchor, steps);
  return steps;
}

}  // namespace

int run_trainer(const Settings& settings, const std::vector<std::string>& worker_targets, const std::string& host,
                const cluster::Cluster* cluster) {
  StopOnSignal signals;
  transport::keep_grpc_initialised();
  int rank = 0;
  RunFiles written;           // where this trainer writes (output_root.h); empty until known, or nowhere
  bool holds_output = false;  // rank 0 holds its output folder (another run's is not written to)
  bool recorded = false;      // and has written this run's summary
  try {
    training::require_builtin_trainer("training --model " + settings.trainer.model + " here");
    const training::DistInfo dist = training::dist_info(settings.launcher, settings.trainer);
    rank = dist.rank;
    written = run_files(settings, dist.rank);  // known first: a failure from here on is recorded there
    const auto lock = hold_output(settings, written, host, dist.rank);  // before anything else (output_lock.h)
    holds_output = lock != nullptr;
    if (dist.local_rank == 0) spdlog::info("trainer {}: {}", host, training::describe(training::torch_runtime()));
    feed::RankFeed feed(rank_feed_options(settings, worker_targets, dist), signals.stop());
    training::RankOptions opts = training::derive_rank_options(settings.trainer, feed.info(), dist, rank_host(feed));
    opts.trainer.mix.seed = settings.data.seed;  // the data's seed also fixes the batches' mixing
    if (opts.trainer.checkpoints.every < 0) opts.trainer.checkpoints.interruptions_per_hour = job_interruptions(settings, cluster);
    training::set_torch_threads(opts.torch_threads);
    training::Trainer trainer(opts.trainer, feed.info(), dist, written.paths, eval_dataset(settings, feed.info()));
    ExitIfStuck stuck(kEndingS, kExitPeer, "trainer " + host + " rank " + std::to_string(dist.rank));  // hung reads
    signals.training_starts();
    const auto interrupts = signals.interrupts(feed);
    const int64_t steps = follow_data(trainer, feed, settings.trainer.epochs, dist.rank, opts.trainer.loop.steps);
    const data::DataPosition from = feed.sampler().position(static_cast<uint64_t>(trainer.start_step()));
    feed.start(static_cast<uint64_t>(steps), static_cast<uint64_t>(trainer.start_step()), opts.local_threads);
    spdlog::info("trainer {} rank {}/{} on {}: {}, {}, {}", host, dist.rank, dist.world, trainer.device(),
                 workers_said(settings.trainer, worker_targets.size()),
                 counted(opts.local_threads, "local preprocessing thread"), counted(opts.torch_threads, "torch thread"));
    const auto audit = settings.trainer.audit_samples
                           ? std::make_unique<feed::SampleAudit>(feed.sampler(), from) : nullptr;
    LiveRecords live(written, dist.rank, trainer.start_step() > 0, opts.steps_per_epoch, settings.quiet);
    const auto metrics = serve_live_metrics(settings, live, feed);
    const training::TrainReport result = train(trainer, feed, audit.get(), signals.stop(), live);
    feed.close();
    // Every rank's audit goes to rank 0, which reports the whole job's coverage.
    const auto audits = audit ? trainer.gather("sample-audit", audit->report().dump()) : std::vector<std::string>{};
    if (dist.rank == 0) {
      RunFacts facts{settings, feed, dist, cluster, opts.local_threads, opts.steps_per_epoch,
                     settings.trainer.batch_size};
      write_run_records(written, live, result, facts, audits);
      recorded = true;
      // The weights are in a checkpoint, but the model the run was for is not: a failure.
      if (!result.model_error.empty()) throw Error(result.model_error);  // exit 1: the next start resumes and writes it
      // Every rank has finished its last step (run() ends with a barrier): now the workers may go.
      if (!settings.launcher.rank_group) feed.release_workers(result.interrupted ? "trainer interrupted" : "training finished");
    }
    return stuck.ending(result.interrupted ? kExitInterrupted : kExitOk);
  } catch (const Interrupted& e) {
    spdlog::warn("trainer {} rank {} stopped before training: {}", host, rank, e.what());
    if (rank == 0) release(settings, worker_targets, "trainer interrupted");
    return kExitInterrupted;
  } catch (const std::exception& e) {
    const bool folder = !(rank == 0 && !holds_output && !written.root.empty());  // else another run's
    record_failure(settings, written, folder, holds_output && !recorded, host, rank, e);
    release(settings, worker_targets, "trainer failed");
    return exit_code(e);
  }
}

}  // namespace tandem::launch
