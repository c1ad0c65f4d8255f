// Internal to the trainer: its state, shared by trainer.cc (set-up, checkpoints, the
// final model, evaluation) and train_loop.cc (Trainer::run, the loop itself).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "checkpoint.h"
#include "collective.h"
#include "device_feed.h"
#include "model.h"
#include "reducer.h"
#include "step_clock.h"
#include "tandem/common/clock.h"
#include "tandem/training/trainer.h"

namespace tandem::training {

// Hex FNV-1a over every parameter's and buffer's bytes: equal on every rank, or the
// ranks diverged.
std::string checksum(Model& model);

struct Trainer::Impl {
  TrainerConfig config;  // the components' options: model, optimizer, loop, checkpoints
  data::DatasetInfo info;
  DistInfo dist;
  RunPaths paths;
  torch::Device device{torch::kCPU};
  InputFormat format;
  std::string compute_dtype, memory_layout;  // seen in the first step (TrainReport)
  std::unique_ptr<Model> model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<Collective> collective;
  std::unique_ptr<Reducer> reducer;
  int64_t start_step = 0;
  std::string resumed_from;  // the checkpoint it resumed from; "" = none
  data::DataAnchor anchor;       // where the steps meet the data (follow())
  nlohmann::json resumed_data;  // that checkpoint's data position (its sidecar's "data"); null = none
  int64_t next_step = 0;  // where the next run() call starts
  std::shared_ptr<const data::Dataset> eval;
  std::function<void(int64_t, int64_t)> eval_progress;  // rank 0's, during run()

  void resume();
  nlohmann::json job() const;  // what makes a checkpoint this job's: the model, its optimizer, the dataset
  std::string foreign_checkpoint(const Checkpoint& c) const;
  void sync_buffers();
  bool train_step(const DeviceBatch* batch, bool stop, int64_t step, StepClock& clock,
                  std::vector<torch::Tensor>& losses);
  void log_line(const LogPoint& p) const;
  torch::Tensor step_loss(const DeviceBatch& batch, int64_t step);
  void observe_formats(const torch::Tensor& input, const torch::Tensor& output);
  std::string save_checkpoint(int64_t step);
  std::string save_model();
  std::string model_description(nlohmann::json meta) const;
};

}  // namespace tandem::training
