// The small values the training layer's pieces share (a rank's place in the job, where
// a run's files go, how it pulls batches, what it reports), apart from the Trainer, so its
// internal headers need not include trainer.h. Torch-free.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "tandem/cluster/options.h"
#include "tandem/data/core/batch.h"
#include "tandem/report/run_records.h"
#include "tandem/training/options.h"

namespace tandem::training {

// This process's place in data-parallel training (RankPlace, torchrun's words) and how its
// process group forms.
struct DistInfo : RankPlace {
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

}  // namespace tandem::training
