#include "tandem/training/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "autocast.h"
#include "batch_mix.h"
#include "checkpoint.h"
#include "evaluate.h"
#include "optim.h"
#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"
#include "tandem/feed/sample_audit.h"
#include "trainer_impl.h"

#if defined(TANDEM_WITH_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace tandem::training {
std::string checksum(Model& model) {
  std::string all;
  std::vector<torch::Tensor> state = model.parameters();
  for (const auto& b : model.buffers()) state.push_back(b);
  for (const auto& p : state) {
    const torch::Tensor c = p.detach().to(torch::kCPU).contiguous();
    all.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  return fingerprint_of(all);
}

namespace {

torch::Device pick_device(const DistInfo& dist) {
  const int gpus = cuda_device_count();
  if (gpus == 0) return torch::kCPU;
  check_ranks_fit_gpus(dist.local_world);
#if defined(TANDEM_WITH_CUDA)
  // Streams, events, pinned memory and NCCL's communicator all follow the current device.
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(dist.local_rank));
  at::globalContext().setBenchmarkCuDNN(true);  // fixed shapes: let cuDNN pick its fastest kernels
#endif
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(dist.local_rank));
}

// model.json's "input" for a training_step model: the batch it trained on, field by field
// (shape per sample; -1 first for a ragged one, which also came as NAME_lengths and
// NAME_offsets).
nlohmann::json fields_input(const data::DatasetInfo& info) {
  nlohmann::json fields = nlohmann::json::array();
  for (const data::FieldSpec& f : info.schema()) {
    fields.push_back({{"name", f.name}, {"dtype", data::dtype_name(f.dtype)}, {"shape", f.shape}, {"ragged", f.ragged()}});
  }
  return {{"training_step", "batch: Dict[str, Tensor], every field as the dataset made it (docs/models.md)"},
          {"fields", fields}};
}

}  // namespace

Trainer::Trainer(const TrainerConfig& config, const data::DatasetInfo& info, const DistInfo& dist, const RunPaths& paths,
                 std::shared_ptr<const data::Dataset> eval)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const ModelOptions& mo = config.model;
  m.config = config;
  m.info = info;
  m.dist = dist;
  m.paths = paths;
  m.eval = std::move(eval);
  m.device = pick_device(dist);
  if (m.device.is_cuda()) install_pinned_buffers(m.device);
  // Under bf16 autocast the first layer computes in bf16 anyway: ship the input as bf16.
  m.format.dtype = mo.amp == "bf16" && m.device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  m.format.channels_last = mo.channels_last;
  torch::manual_seed(0);
  at::globalContext().setFlushDenormal(true);  // near-zero gradients late in training are slow otherwise
  m.model = build_model(mo.name, info);
  check_mixing(config.mix, *m.model, info, mo.name);
  m.model->to(m.device);
  m.format.fields = m.model->has_training_step();
  if (m.format.fields && m.eval) {
    if (dist.rank == 0) {
      spdlog::warn("--eval-data is not evaluated: --model {} trains through training_step, and tandem's evaluation "
                   "is the top-1 accuracy of forward(image); evaluate the saved model.pt in Python",
                   mo.name);
    }
    m.eval = nullptr;
  }
  if (mo.channels_last) {
    for (auto& p : m.model->parameters()) {
      if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  m.optimizer = make_optimizer(config.optimizer, m.model->parameters(), m.device);
  m.collective = std::make_unique<Collective>(dist, m.device);
  m.resume();
  m.next_step = m.start_step;
  std::vector<torch::Tensor> state = m.model->parameters();
  for (const auto& b : m.model->buffers()) state.push_back(b);
  m.collective->broadcast(state);
  m.reducer = std::make_unique<Reducer>(m.model->parameters(), *m.collective, mo.overlap_grad_sync);
}

Trainer::~Trainer() = default;

int64_t Trainer::start_step() const { return impl_->start_step; }

std::string Trainer::resumed_from() const { return impl_->resumed_from; }
std::optional<data::DataPosition> Trainer::resumed_position() const {
  return feed::position_from_json(impl_->resumed_data);
}

void Trainer::follow(const data::DataAnchor& anchor, int64_t steps) {
  impl_->anchor = anchor;
  impl_->config.loop.steps = steps;
  impl_->config.optimizer.steps = steps;
}

std::string Trainer::device() const { return impl_->device.str(); }

void Trainer::barrier() { impl_->collective->barrier(); }

std::vector<std::string> Trainer::gather(const std::string& key, const std::string& mine) {
  Impl& m = *impl_;
  if (m.dist.world <= 1) return {mine};
  m.collective->put(key + "/" + std::to_string(m.dist.rank), mine);
  if (m.dist.rank != 0) return {};
  std::vector<std::string> all;
  for (int i = 0; i < m.dist.world; ++i) all.push_back(m.collective->take(key + "/" + std::to_string(i)));
  return all;
}

nlohmann::json Trainer::Impl::job() const {
  const OptimizerOptions& o = config.optimizer;
  return {{"model", config.model.name},
          {"optimizer", o.optimizer},
          {"dataset", info.fingerprint},
          {"settings",
           {{"lr", o.lr},
            {"momentum", o.momentum},
            {"weight_decay", o.weight_decay},
            {"lr_schedule", o.schedule},
            {"warmup_steps", o.warmup_steps},
            {"seed", config.mix.seed}}}};
}

// Why `c` is another run's, unless --resume-any: "" when it is this run's (or says
// nothing). What it says is compared: an older checkpoint without settings still fits.
std::string Trainer::Impl::foreign_checkpoint(const Checkpoint& c) const {
  if (config.checkpoints.resume_any || !c.job.is_object()) return "";
  const nlohmann::json mine = job();
  std::vector<std::string> differ;
  auto compare = [&](const nlohmann::json& theirs, const nlohmann::json& ours, const std::string& prefix) {
    for (const auto& [key, value] : theirs.items()) {
      if (key == "settings" && prefix.empty()) continue;
      if (!ours.contains(key) || ours[key] != value) {
        differ.push_back(fmt::format("{} {} (this run: {})", key, printable(value.dump(), 80),
                                     ours.contains(key) ? printable(ours[key].dump(), 80) : "none"));
      }
    }
  };
  compare(c.job, mine, "");
  if (c.job.contains("settings") && c.job["settings"].is_object()) compare(c.job["settings"], mine["settings"], "settings");
  if (differ.empty()) return "";
  std::string list;
  for (const auto& d : differ) list += (list.empty() ? "" : ", ") + d;
  return "checkpoint " + c.path + " (step " + std::to_string(c.step) + ") was written by another run: its " + list +
         ". Resuming it would train this run from that one's weights and optimizer state: move it out of " +
         paths.checkpoint_dir + ", give this job its own output folder (another --job-name), or pass --resume-any "
         "to train on from it";
}

// Rank 0 picks the newest valid checkpoint and shares its bytes through the store, so a
// rank on another host resumes from the same one (or refuses it with rank 0's reason).
void Trainer::Impl::resume() {
  std::string bytes, origin;
  if (dist.rank == 0) {
    std::optional<Checkpoint> c;
    if (!paths.checkpoint_dir.empty()) c = newest_checkpoint(paths.checkpoint_dir);
    const std::string foreign = c ? foreign_checkpoint(*c) : "";
    if (c && foreign.empty()) {
      bytes = std::move(c->bytes);
      origin = c->path;
    }
    if (c && foreign.empty()) resumed_data = c->data;
    collective->put("resume-data", resumed_data.dump());
    collective->put("resume-origin", !foreign.empty() ? "!" + foreign : origin.empty() ? "-" : origin);
    collective->put("resume", bytes);
    if (!foreign.empty()) throw ConfigError(foreign);
  } else {
    resumed_data = nlohmann::json::parse(collective->take("resume-data"), nullptr, false);
    origin = collective->take("resume-origin");
    bytes = collective->take("resume");
    if (origin.rfind('!', 0) == 0) throw ConfigError(origin.substr(1));
    if (origin == "-") origin.clear();
  }
  if (origin.empty()) return;
  start_step = restore_state(bytes, origin, *model, *optimizer, device);
  resumed_from = origin;
  if (dist.rank == 0) spdlog::info("resumed from {} at step {}", origin, start_step);
}

// Gradients are averaged, buffers (BatchNorm's running statistics) are not: each rank's
// drift with its own batches. Rank 0's are the model's (it saves them), so they are
// shared before every rank evaluates with them and at the end, as DDP does every step.
void Trainer::Impl::sync_buffers() {
  if (dist.world <= 1) return;
  std::vector<torch::Tensor> buffers = model->buffers();
  if (!buffers.empty()) collective->broadcast(buffers);
}

// No host synchronisation: the loss stays on the device, clipping is computed there, and
// on a GPU every call only queues work.
// One step: forward and backward on `batch`, then the gradient sync, which carries this
// rank's vote to stop. A rank with no batch (its feed closed by a stop) skips to the sync
// with zero gradients, so that no peer waits for it. Returns false, with the model
// unchanged on every rank, when any rank voted to stop.
bool Trainer::Impl::train_step(const DeviceBatch* batch, bool stop, int64_t step, StepClock& clock,
                               std::vector<torch::Tensor>& losses) {
  set_learning_rate(*optimizer, learning_rate(config.optimizer, step));
  reducer->zero_grad(stop || batch == nullptr);
  torch::Tensor loss;
  if (batch) {
    Autocast amp(config.model.amp == "bf16", device.is_cuda());
    loss = step_loss(*batch, step);
  }
  if (loss.defined()) loss.backward();
  clock.mark(StepClock::kForwardBackward);
  const bool stopping = reducer->finish();
  clock.mark(StepClock::kCommunication);
  if (stopping) return false;
  if (const double clip = config.optimizer.clip_grad_norm; clip > 0) reducer->clip_grad_norm(clip);
  optimizer->step();
  clock.mark(StepClock::kOptimizer);
  losses.push_back(loss.detach());
  return true;
}

// The batch's loss in float32: forward then loss (on the batch mixed for `step`, against
// soft targets, with --mixup, --cutmix or --label-smoothing), or the model's
// training_step on every field (whose returned loss's dtype is what the report calls the
// compute dtype).
torch::Tensor Trainer::Impl::step_loss(const DeviceBatch& batch, int64_t step) {
  if (format.fields) {
    const torch::Tensor loss = model->training_step(batch.fields);
    if (compute_dtype.empty()) {
      const auto image = std::find_if(batch.fields.begin(), batch.fields.end(),
                                      [](const auto& f) { return f.first == data::kImageField; });
      observe_formats(image == batch.fields.end() ? torch::Tensor() : image->second, loss);
    }
    return loss.reshape({}).to(torch::kFloat32);
  }
  if (config.mix.soft_targets()) {
    const MixedBatch mixed = mix_batch(batch.x, batch.y, config.mix, step, dist.rank, info.num_classes);
    const torch::Tensor out = model->forward(mixed.x);
    if (compute_dtype.empty()) observe_formats(mixed.x, out);
    return model->loss(out, mixed.targets).to(torch::kFloat32);
  }
  const torch::Tensor out = model->forward(batch.x);
  if (compute_dtype.empty()) observe_formats(batch.x, out);
  return model->loss(out, batch.y).to(torch::kFloat32);
}

// What the step really computed with, for the report: a flag that had no effect shows.
void Trainer::Impl::observe_formats(const torch::Tensor& input, const torch::Tensor& output) {
  const auto t = output.scalar_type();
  compute_dtype = t == torch::kBFloat16 ? "bfloat16" : t == torch::kHalf ? "float16" : t == torch::kFloat32 ? "float32"
                                                                                                          : "other";
  // suggest_memory_format, not is_contiguous(ChannelsLast): with one channel, or 1x1
  // kernels, a contiguous tensor is both.
  const auto last = [](const torch::Tensor& t) {
    return t.dim() == 4 && t.suggest_memory_format() == torch::MemoryFormat::ChannelsLast;
  };
  bool channels_last = input.defined() && last(input);
  for (const auto& p : model->parameters()) {
    if (p.dim() == 4 && p.size(1) > 1 && p.size(2) * p.size(3) > 1) channels_last = channels_last && last(p);
  }
  memory_layout = channels_last ? "channels_last" : "contiguous";
}

void Trainer::Impl::log_line(const LogPoint& p) const {
  if (dist.rank != 0) return;
  spdlog::info("step={} loss={:.4f} samples_per_sec={:.1f} data_wait_pct={:.1f} lr={:.6g}", p.step, p.loss,
               p.samples_per_sec, p.data_wait_pct, p.lr);
}

std::string Trainer::Impl::save_checkpoint(int64_t step) {
  const std::string& dir = paths.checkpoint_dir;
  if (dist.rank != 0 || dir.empty()) return {};
  const int batch = config.loop.batch_size;
  const bool known = batch > 0 && static_cast<uint64_t>(batch) * static_cast<uint64_t>(dist.world) <= info.size;
  const nlohmann::json data =
      known ? feed::position_json(data::position_at(static_cast<uint64_t>(step), info.size, batch, dist.world, anchor))
            : nlohmann::json();
  write_checkpoint(dir, step, serialize_state(*model, *optimizer, step), config.checkpoints.keep, job(), data);
  spdlog::info("checkpoint at step {} in {}", step, dir);
  return dir;
}

// The final model in a form Python uses directly (model.pt: a TorchScript module or a
// state dict under torchvision's names), and model.json saying what it is and how to
// load it. model.pt appears only once model.json is written: a disk that fills leaves
// neither, not a model without its description.
std::string Trainer::Impl::save_model() {
  const std::string& dir = paths.model_dir;
  if (dist.rank != 0 || dir.empty()) return {};
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/model.pt", part = file + ".part";
  nlohmann::json meta;
  try {
    meta = model->save_for_python(part);
    write_file_atomically(dir + "/model.json", model_description(std::move(meta)));
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(part, ignored);
    throw;
  }
  std::filesystem::rename(part, file);
  return file;
}

// model.json: what save_for_python said (`meta`), with the model, its data and its input.
std::string Trainer::Impl::model_description(nlohmann::json meta) const {
  meta["model"] = config.model.name;
  meta["num_classes"] = info.num_classes;
  meta["classes"] = info.class_names;  // label -> name; empty when the labels have none
  meta["dataset"] = info.name;
  meta["file"] = "model.pt";
  if (format.fields) meta["input"] = fields_input(info);
  else {
    meta["input"] = {{"shape", info.sample_shape},
                     {"dtype", "float32"},
                     {"scaling", info.dtype == data::DType::kUInt8 ? "uint8 pixels / 255" : "as the pipeline makes them"},
                     {"mean", info.mean},
                     {"std", info.std}};
  }
  // Folder names need not be UTF-8: such bytes become U+FFFD rather than failing the save.
  return meta.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

double Trainer::evaluate() {
  Impl& m = *impl_;
  m.sync_buffers();
  const EvalCounts c =
      evaluate_shard(*m.model, m.eval, m.dist.rank, m.dist.world, m.device, m.format, m.eval_progress);
  const std::vector<int64_t> total = m.collective->sum({c.correct, c.samples});
  return total[1] ? static_cast<double>(total[0]) / static_cast<double>(total[1]) : 0.0;
}

int cuda_device_count() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

void check_ranks_fit_gpus(int procs) {
  const int gpus = cuda_device_count();
  if (gpus > 0 && procs > gpus) {
    throw ConfigError(counted(procs, "trainer process", "trainer processes") + " on this host but it has " +
                      counted(gpus, "GPU") + ": give each process its own GPU with --procs-per-host " + std::to_string(gpus) +
                      " or less (0 = one per GPU)");
  }
}

void set_torch_threads(int threads) { torch::set_num_threads(std::max(threads, 1)); }

}  // namespace tandem::training
