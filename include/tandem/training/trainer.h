// The training loop. This header is Torch-free so the launch code that calls it (and
// that speaks gRPC) never parses LibTorch.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/batching/batch.h"
#include "tandem/data/sources/dataset.h"
#include "tandem/report/run_records.h"

namespace tandem::training {

// This process's place in data-parallel training, torchrun style.
struct DistInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double timeout_s = 300;
  std::string gloo_address;  // the address Gloo binds to; empty = this host's name
  // Under torchrun the agent already serves the TCP store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank is its client, under the prefix
  // "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>", as torch.distributed does.
  bool agent_store = false;
  int restart_count = 0;
  bool single_rank_group = false;  // a process group even for a world of 1 (--single-rank-group)
};

// This process's place from what its launcher said (read and checked by
// cluster::read_launcher_env), with --master-port and --dist-timeout.
DistInfo dist_info(const LauncherEnv& env, const TrainerOptions& opts);

struct RunPaths {
  std::string checkpoint_dir;  // <root>/checkpoints; empty = no checkpoints
  std::string model_dir;       // <root>/model; empty = the final model is not saved
};

// What a run reports (plain records of the report layer, below this one).
using report::LogPoint;
using report::StepTimes;
using report::TrainReport;

// Pulls the next batch; nullopt ends training.
using NextBatch = std::function<std::optional<data::Batch>()>;

// What a run reports as it goes (rank 0 only). Every member may be empty.
struct RunObserver {
  std::function<void(const LogPoint&)> on_log;
  // Every step and at each evaluation or checkpoint (`phase` "train", "eval", "checkpoint"):
  // for a live status line.
  std::function<void(int64_t step, int64_t total, const char* phase)> on_progress;
  // During an evaluation: rank 0's samples scored and its share of the held-out set.
  std::function<void(int64_t done, int64_t total)> on_eval_progress;
  bool log_lines = true;  // the plain "step=..." metric lines
};

// Limits on one call of Trainer::run, for benchmarks.
struct RunLimits {
  int64_t max_steps = -1;  // stop after this many steps (the next call continues); -1 = to opts.steps
  // Upload the first batch once and train on it every step: the training loop alone,
  // with no data path, i.e. the ceiling the feed is measured against.
  bool resident = false;
};

class Trainer {
 public:
  // Builds the model and optimizer, joins the process group (when dist.world > 1),
  // resumes from the newest valid checkpoint in paths.checkpoint_dir (rank 0 reads it and
  // shares it), and makes every rank's parameters equal to rank 0's.
  // `eval` (may be null) is the held-out set; every rank evaluates its share of it.
  // On a GPU, the rank uses GPU LOCAL_RANK and batch buffers become pinned host memory.
  // Throws ConfigError when this host has more ranks than GPUs.
  Trainer(const TrainerOptions& opts, const data::DatasetInfo& info, const DistInfo& dist, const RunPaths& paths,
          std::shared_ptr<const data::Dataset> eval = nullptr);
  ~Trainer();

  // "cpu" or "cuda:N".
  std::string device() const;

  // The first step this run trains; batches must start at this sequence number.
  int64_t start_step() const;

  // Trains until opts.steps, the end of the batches, or `stop` on any rank (every rank
  // stops at the same step; rank 0 then checkpoints). Logs a metrics line every
  // opts.log_every steps (rank 0). Writes checkpoints and, when finished, the model.
  // Each call continues from the step the previous one reached.
  TrainReport run(const NextBatch& next, const std::atomic<bool>& stop, const RunLimits& limits = {},
                  const RunObserver& observer = {});

  // Waits for every rank (e.g. before rank 0 releases the data workers).
  void barrier();

  // Every rank's `mine`, in rank order, on rank 0 (through the rendezvous store); empty
  // on the other ranks. Every rank must call it with the same `key`.
  std::vector<std::string> gather(const std::string& key, const std::string& mine);

  // Top-1 accuracy on the held-out set: each rank scores every world-th sample from its
  // rank on, and the counts are summed. Every rank must call it. REQUIRES: an eval set.
  double evaluate();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// How many GPUs this process sees.
int cuda_device_count();

// Throws ConfigError when `procs` ranks on this host would have to share GPUs.
void check_ranks_fit_gpus(int procs);

// Sets LibTorch's intra-op thread count for this process.
void set_torch_threads(int threads);

}  // namespace tandem::training
