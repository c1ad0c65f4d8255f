// Checkpoints (Torch world only): the model's parameters and buffers by name, the
// optimizer and the step in one LibTorch archive, plus
// a JSON sidecar holding its size and hash, so a torn or corrupted file is recognised and
// skipped rather than half-loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include <torch/optim/optimizer.h>

#include "model.h"

namespace tandem::training {

struct Checkpoint {
  int64_t step = 0;
  std::string path;
  std::string bytes;
  nlohmann::json job;  // the job that wrote it (its sidecar's "job"); null: written before tandem said
  nlohmann::json data;  // where it was in the data (feed::position_json); null: written before tandem said
};

std::string serialize_state(Model& model, torch::optim::Optimizer& optimizer, int64_t step);

// Loads `bytes` into the model and optimizer and returns the step. Every tensor lands on
// `device` (a checkpoint written by rank 0 on cuda:0 must not put another rank's
// optimizer state there). Throws ConfigError naming `origin` when the checkpoint does
// not fit (e.g. written for another model).
int64_t restore_state(const std::string& bytes, const std::string& origin, Model& model,
                      torch::optim::Optimizer& optimizer, torch::Device device);

// Writes <dir>/ckpt-<step>.pt (temp file + rename) and its .json sidecar, then deletes
// all but the newest `keep`.
// `job` (the model, optimizer and dataset that wrote it) and `data` (its place in the
// data and its geometry) go into the sidecar.
void write_checkpoint(const std::string& dir, int64_t step, const std::string& bytes, int keep,
                      const nlohmann::json& job = nullptr, const nlohmann::json& data = nullptr);

// The newest checkpoint in `dir` whose bytes match its sidecar. Corrupt ones are reported
// (logged, with the path) and skipped.
std::optional<Checkpoint> newest_checkpoint(const std::string& dir);

}  // namespace tandem::training
