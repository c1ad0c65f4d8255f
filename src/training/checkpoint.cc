#include "checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/hash.h"
#include "tandem/data/core/dataset.h"

namespace tandem::training {
namespace {

namespace fs = std::filesystem;

fs::path checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%09lld.pt", static_cast<long long>(step));
  return fs::path(dir) / name;
}

// Steps of the checkpoints in `dir`, newest first.
std::vector<int64_t> steps_in(const std::string& dir) {
  std::vector<int64_t> steps;
  if (!fs::is_directory(dir)) return steps;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == 17 && name.rfind("ckpt-", 0) == 0 && entry.path().extension() == ".pt") {
      steps.push_back(std::stoll(name.substr(5, 9)));
    }
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string serialize_state(Model& model, torch::optim::Optimizer& optimizer, int64_t step) {
  c10::Dict<std::string, torch::Tensor> state;
  for (const auto& [name, t] : model.named_parameters()) state.insert(name, t.detach());
  for (const auto& [name, t] : model.named_buffers()) state.insert(name, t.detach());
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("model_state", state);
  archive.write("optimizer", optimizer_archive);
  archive.write("step", torch::tensor(step));
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

namespace {

// Copies every tensor of `state` into the model's own (their storage, device and layout
// stay). The names must match exactly: a checkpoint of another model is refused.
void load_model_state(const c10::Dict<std::string, torch::Tensor>& state, Model& model) {
  NamedTensors mine = model.named_parameters();
  for (auto& b : model.named_buffers()) mine.push_back(std::move(b));
  if (state.size() != mine.size()) {
    throw ConfigError("it holds " + std::to_string(state.size()) + " tensors, the model has " +
                      std::to_string(mine.size()));
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : mine) {
    const auto it = state.find(name);
    if (it == state.end()) throw ConfigError("it has no '" + name + "'");
    if (it->value().sizes() != t.sizes()) throw ConfigError("its '" + name + "' has another shape");
    t.copy_(it->value());
  }
}

}  // namespace

int64_t restore_state(const std::string& bytes, const std::string& origin, Model& model,
                      torch::optim::Optimizer& optimizer, torch::Device device) {
  const std::string fix =
      ": resume with the settings it was written with, or move it out of the checkpoints directory";
  try {
    std::istringstream in(bytes);
    torch::serialize::InputArchive archive, optimizer_archive;
    archive.load_from(in, device);
    c10::IValue state;
    if (!archive.try_read("model_state", state) || !state.isGenericDict()) {
      throw ConfigError("it holds no model state (written by an older tandem?)");
    }
    load_model_state(c10::impl::toTypedDict<std::string, torch::Tensor>(state.toGenericDict()), model);
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor step;
    archive.read("step", step);
    return step.item<int64_t>();
  } catch (const ConfigError& e) {
    throw ConfigError("checkpoint " + origin + " does not fit this model (" + e.what() + ")" + fix);
  } catch (const c10::Error& e) {
    throw ConfigError("checkpoint " + origin + " does not fit this model and optimizer (" +
                      std::string(e.what_without_backtrace()) + ")" + fix);
  }
}

void write_checkpoint(const std::string& dir, int64_t step, const std::string& bytes, int keep,
                      const nlohmann::json& job, const nlohmann::json& data) {
  const fs::path path = checkpoint_path(dir, step);
  write_file_atomically(path.string(), bytes);
  nlohmann::json sidecar = {{"step", step}, {"bytes", bytes.size()}, {"fnv1a", fingerprint_of(bytes)}};
  if (!job.is_null()) sidecar["job"] = job;
  if (!data.is_null()) sidecar["data"] = data;
  write_file_atomically(path.string() + ".json", sidecar.dump() + "\n");
  const std::vector<int64_t> steps = steps_in(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < steps.size(); ++i) {
    fs::remove(checkpoint_path(dir, steps[i]));
    fs::remove(checkpoint_path(dir, steps[i]).string() + ".json");
  }
}

std::optional<Checkpoint> newest_checkpoint(const std::string& dir) {
  for (int64_t step : steps_in(dir)) {
    const fs::path path = checkpoint_path(dir, step);
    Checkpoint c{step, path.string(), read_all(path)};
    const nlohmann::json sidecar = nlohmann::json::parse(read_all(path.string() + ".json"), nullptr, false);
    if (sidecar.is_discarded() || sidecar.value("bytes", uint64_t{0}) != c.bytes.size() ||
        sidecar.value("fnv1a", std::string()) != fingerprint_of(c.bytes)) {
      spdlog::error("checkpoint {} is corrupt or incomplete (its size or hash does not match {}.json); skipping it",
                    path.string(), path.filename().string());
      continue;
    }
    c.job = sidecar.value("job", nlohmann::json());
    c.data = sidecar.value("data", nlohmann::json());
    return c;
  }
  return std::nullopt;
}

}  // namespace tandem::training
