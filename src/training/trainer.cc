#include "tandem/training/trainer.h"

#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "autocast.h"
#include "checkpoint.h"
#include "collective.h"
#include "model.h"
#include "optim.h"
#include "tandem/common/error.h"
#include "tandem/data/batch_maker.h"
#include "tandem/report/summary.h"

namespace tandem::training {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

torch::ScalarType scalar_type(data::DType dtype) {
  switch (dtype) {
    case data::DType::kFloat32: return torch::kFloat32;
    case data::DType::kBFloat16: return torch::kBFloat16;
    case data::DType::kFloat16: return torch::kFloat16;
    case data::DType::kUInt8: return torch::kUInt8;
  }
  return torch::kFloat32;
}

void check_batch(const data::Batch& batch, const data::DatasetInfo& info) {
  if (batch.shape.size() != info.sample_shape.size() + 1 ||
      !std::equal(info.sample_shape.begin(), info.sample_shape.end(), batch.shape.begin() + 1)) {
    throw NetworkError("batch " + std::to_string(batch.sequence) + " has the wrong sample shape for dataset '" +
                       info.name + "': give every host the same data settings");
  }
}

// Hex FNV-1a over every parameter's bytes: equal on every rank, or the ranks diverged.
std::string checksum(torch::nn::Module& model) {
  std::string all;
  for (const auto& p : model.parameters()) {
    const torch::Tensor c = p.detach().to(torch::kCPU).contiguous();
    all.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  return data::fingerprint_of(all);
}

}  // namespace

struct Trainer::Impl {
  TrainerOptions opts;
  data::DatasetInfo info;
  DistInfo dist;
  RunPaths paths;
  torch::Device device{torch::kCPU};
  torch::nn::AnyModule model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<Collective> collective;
  int64_t start_step = 0;
  std::shared_ptr<const data::Dataset> eval;
  torch::Tensor mean, std;  // [1, C, 1, 1] on the device, when the data asks for normalisation

  void resume();
  std::pair<torch::Tensor, torch::Tensor> to_tensors(data::Batch& batch) const;
  double train_step(data::Batch& batch, int64_t step);
  void log_line(int64_t step, double loss, double window_s, int64_t window_samples, double window_wait) const;
  std::string save_checkpoint(int64_t step);
  std::string save_model();
  double evaluate();
};

Trainer::Trainer(const TrainerOptions& opts, const data::DatasetInfo& info, const DistInfo& dist, const RunPaths& paths,
                 std::shared_ptr<const data::Dataset> eval)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opts = opts;
  m.info = info;
  m.dist = dist;
  m.paths = paths;
  m.eval = std::move(eval);
  const int gpus = cuda_device_count();
  if (gpus > 0) m.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(dist.local_rank % gpus));
  if (!info.mean.empty()) {
    const int64_t c = static_cast<int64_t>(info.mean.size());
    m.mean = torch::tensor(info.mean).view({1, c, 1, 1}).to(m.device);
    m.std = torch::tensor(info.std).view({1, c, 1, 1}).to(m.device);
  }
  torch::manual_seed(0);
  at::globalContext().setFlushDenormal(true);  // near-zero gradients late in training are slow otherwise
  m.model = make_model(opts.model, info);
  m.model.ptr()->to(m.device);
  if (opts.channels_last) {
    for (auto& p : m.model.ptr()->parameters()) {
      if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  m.optimizer = make_optimizer(opts, m.model.ptr()->parameters());
  m.collective = std::make_unique<Collective>(dist, m.device.is_cuda());
  m.resume();
  std::vector<torch::Tensor> state = m.model.ptr()->parameters();
  for (const auto& b : m.model.ptr()->buffers()) state.push_back(b);
  m.collective->broadcast(state);
}

Trainer::~Trainer() = default;

int64_t Trainer::start_step() const { return impl_->start_step; }

void Trainer::barrier() { impl_->collective->barrier(); }

// Rank 0 picks the newest valid checkpoint and shares its bytes through the store, so a
// rank on another host resumes from the same one.
void Trainer::Impl::resume() {
  std::string bytes, origin;
  if (dist.rank == 0) {
    std::optional<Checkpoint> c;
    if (!paths.checkpoint_dir.empty()) c = newest_checkpoint(paths.checkpoint_dir);
    if (c) {
      bytes = std::move(c->bytes);
      origin = c->path;
    }
    collective->put("resume-origin", origin.empty() ? "-" : origin);
    collective->put("resume", bytes);
  } else {
    origin = collective->take("resume-origin");
    bytes = collective->take("resume");
    if (origin == "-") origin.clear();
  }
  if (origin.empty()) return;
  start_step = restore_state(bytes, origin, *model.ptr(), *optimizer);
  model.ptr()->to(device);
  if (dist.rank == 0) spdlog::info("resumed from {} at step {}", origin, start_step);
}

std::pair<torch::Tensor, torch::Tensor> Trainer::Impl::to_tensors(data::Batch& batch) const {
  torch::Tensor x = torch::from_blob(batch.data.data(), batch.shape, torch::TensorOptions(scalar_type(batch.dtype)));
  torch::Tensor y = torch::from_blob(batch.labels.data(), {static_cast<int64_t>(batch.labels.size())}, torch::kInt64);
  // Narrow wire dtypes travel to the device as they are and widen there.
  if (device.is_cuda()) {
    x = x.to(device);
    y = y.to(device);
  }
  if (batch.dtype == data::DType::kUInt8) x = x.to(torch::kFloat32).div_(255.0f);
  else if (x.scalar_type() != torch::kFloat32) x = x.to(torch::kFloat32);
  if (mean.defined()) x = (x - mean) / std;
  if (opts.channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
  return {x, y};
}

double Trainer::Impl::train_step(data::Batch& batch, int64_t step) {
  check_batch(batch, info);
  auto [x, y] = to_tensors(batch);
  set_learning_rate(*optimizer, learning_rate(opts, step));
  optimizer->zero_grad();
  torch::Tensor loss;
  {
    Autocast amp(opts.amp == "bf16", device.is_cuda());
    loss = torch::nn::functional::cross_entropy(model.forward(x).to(torch::kFloat32), y);
  }
  loss.backward();
  collective->average_gradients(model.ptr()->parameters());
  if (opts.clip_grad_norm > 0) torch::nn::utils::clip_grad_norm_(model.ptr()->parameters(), opts.clip_grad_norm);
  optimizer->step();
  return loss.item<double>();
}

void Trainer::Impl::log_line(int64_t step, double loss, double window_s, int64_t window_samples,
                             double window_wait) const {
  if (dist.rank != 0) return;
  spdlog::info("step={} loss={:.4f} samples_per_sec={:.1f} data_wait_pct={:.1f}", step, loss,
               window_samples * dist.world / window_s, 100.0 * window_wait / window_s);
}

std::string Trainer::Impl::save_checkpoint(int64_t step) {
  if (dist.rank != 0 || paths.checkpoint_dir.empty()) return {};
  write_checkpoint(paths.checkpoint_dir, step, serialize_state(*model.ptr(), *optimizer, step), opts.keep_checkpoints);
  spdlog::info("checkpoint at step {} in {}", step, paths.checkpoint_dir);
  return paths.checkpoint_dir;
}

// The final model as a LibTorch archive (torch::load-able) and a JSON of its settings.
std::string Trainer::Impl::save_model() {
  if (dist.rank != 0 || paths.model_dir.empty()) return {};
  std::filesystem::create_directories(paths.model_dir);
  const std::string file = paths.model_dir + "/model.pt";
  torch::save(model.ptr(), file + ".tmp");
  std::filesystem::rename(file + ".tmp", file);
  const nlohmann::json meta = {{"model", opts.model},
                               {"num_classes", info.num_classes},
                               {"sample_shape", info.sample_shape},
                               {"dataset", info.name},
                               {"input_dtype", "float32"},
                               {"file", "model.pt"}};
  report::write_file_atomically(paths.model_dir + "/model.json", meta.dump(2) + "\n");
  return file;
}

// Top-1 accuracy over the whole held-out set, in batches made on this thread.
double Trainer::Impl::evaluate() {
  torch::NoGradGuard no_grad;
  model.ptr()->eval();
  data::BatchMaker maker(eval, nullptr, eval->info().dtype);
  const uint64_t n = eval->info().size;
  int64_t correct = 0;
  for (uint64_t first = 0; first < n; first += 256) {
    data::BatchRequest req{first, 0, {}};
    for (uint64_t i = first; i < std::min(n, first + 256); ++i) req.indices.push_back(i);
    data::Batch batch = maker.make(req);
    auto [x, y] = to_tensors(batch);
    correct += model.forward(x).argmax(1).eq(y).sum().item<int64_t>();
  }
  model.ptr()->train();
  return n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
}

TrainReport Trainer::run(const NextBatch& next, const std::atomic<bool>& stop) {
  Impl& m = *impl_;
  TrainReport r;
  r.device = m.device.str();
  r.model = m.opts.model;
  r.torch_threads = torch::get_num_threads();
  r.rank = m.dist.rank;
  r.world = m.dist.world;
  r.start_step = m.start_step;
  const auto start = Clock::now();
  auto window_start = start;
  double window_wait = 0;
  int64_t window_samples = 0;
  int64_t step = m.start_step;
  for (; step < m.opts.steps; ++step) {
    if (m.collective->any(stop.load())) {
      r.interrupted = true;
      break;
    }
    const auto wait_start = Clock::now();
    std::optional<data::Batch> batch = next();
    const double waited = seconds_since(wait_start);
    r.data_wait_seconds += waited;
    window_wait += waited;
    if (!batch) break;
    const double loss = m.train_step(*batch, step);
    r.losses.push_back(loss);
    r.samples += batch->size();
    window_samples += batch->size();
    const int64_t done = step + 1;
    if (done % m.opts.log_every == 0 || done == m.opts.steps) {
      m.log_line(done, loss, seconds_since(window_start), window_samples, window_wait);
      window_start = Clock::now();
      window_wait = 0;
      window_samples = 0;
    }
    const bool last = done == m.opts.steps;
    if (m.eval && m.dist.rank == 0 && (last || (m.opts.eval_every > 0 && done % m.opts.eval_every == 0))) {
      const double accuracy = m.evaluate();
      r.eval_accuracy = accuracy;
      r.eval_history.emplace_back(done, accuracy);
      spdlog::info("step={} eval_accuracy={:.4f}", done, accuracy);
    }
    if (m.opts.checkpoint_every > 0 && done % m.opts.checkpoint_every == 0 && done < m.opts.steps) {
      r.last_checkpoint = m.save_checkpoint(done);
    }
  }
  if (r.interrupted) r.last_checkpoint = m.save_checkpoint(step);
  else r.model_file = m.save_model();
  r.steps = static_cast<int64_t>(r.losses.size());
  if (!r.losses.empty()) {
    r.first_loss = r.losses.front();
    r.final_loss = r.losses.back();
  }
  r.wall_seconds = seconds_since(start);
  r.samples_per_sec = r.wall_seconds > 0 ? r.samples / r.wall_seconds : 0;
  r.data_wait_fraction = r.wall_seconds > 0 ? r.data_wait_seconds / r.wall_seconds : 0;
  const std::string mine = checksum(*m.model.ptr());
  m.collective->put("checksum/" + std::to_string(m.dist.rank), mine);
  m.collective->barrier();
  if (m.dist.world <= 1) r.param_checksums = {mine};
  else if (m.dist.rank == 0) {
    for (int i = 0; i < m.dist.world; ++i) r.param_checksums.push_back(m.collective->take("checksum/" + std::to_string(i)));
  }
  return r;
}

int cuda_device_count() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

void set_torch_threads(int threads) { torch::set_num_threads(std::max(threads, 1)); }

}  // namespace tandem::training
