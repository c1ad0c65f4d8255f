#include "tandem/training/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "autocast.h"
#include "checkpoint.h"
#include "collective.h"
#include "device_feed.h"
#include "evaluate.h"
#include "model.h"
#include "optim.h"
#include "reducer.h"
#include "step_clock.h"
#include "tandem/common/error.h"
#include "tandem/common/files.h"

#if defined(TANDEM_WITH_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace tandem::training {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Hex FNV-1a over every parameter's and buffer's bytes: equal on every rank, or the
// ranks diverged.
std::string checksum(Model& model) {
  std::string all;
  std::vector<torch::Tensor> state = model.parameters();
  for (const auto& b : model.buffers()) state.push_back(b);
  for (const auto& p : state) {
    const torch::Tensor c = p.detach().to(torch::kCPU).contiguous();
    all.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  return data::fingerprint_of(all);
}

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

}  // namespace

struct Trainer::Impl {
  TrainerOptions opts;
  data::DatasetInfo info;
  DistInfo dist;
  RunPaths paths;
  torch::Device device{torch::kCPU};
  InputFormat format;
  std::unique_ptr<Model> model;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<Collective> collective;
  std::unique_ptr<Reducer> reducer;
  int64_t start_step = 0;
  int64_t next_step = 0;  // where the next run() call starts
  std::shared_ptr<const data::Dataset> eval;
  std::function<void(int64_t, int64_t)> eval_progress;  // rank 0's, during run()

  void resume();
  void sync_buffers();
  bool train_step(const DeviceBatch* batch, bool stop, int64_t step, StepClock& clock,
                  std::vector<torch::Tensor>& losses);
  void log_line(const LogPoint& p) const;
  std::string save_checkpoint(int64_t step);
  std::string save_model();
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
  m.device = pick_device(dist);
  if (m.device.is_cuda()) install_pinned_buffers(m.device);
  // Under bf16 autocast the first layer computes in bf16 anyway: ship the input as bf16.
  m.format.dtype = opts.amp == "bf16" && m.device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  m.format.channels_last = opts.channels_last;
  torch::manual_seed(0);
  at::globalContext().setFlushDenormal(true);  // near-zero gradients late in training are slow otherwise
  m.model = build_model(opts.model, info);
  m.model->to(m.device);
  if (opts.channels_last) {
    for (auto& p : m.model->parameters()) {
      if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
    }
  }
  m.optimizer = make_optimizer(opts, m.model->parameters(), m.device);
  m.collective = std::make_unique<Collective>(dist, m.device);
  m.resume();
  m.next_step = m.start_step;
  std::vector<torch::Tensor> state = m.model->parameters();
  for (const auto& b : m.model->buffers()) state.push_back(b);
  m.collective->broadcast(state);
  m.reducer = std::make_unique<Reducer>(m.model->parameters(), *m.collective, opts.grad_sync == "overlap");
}

Trainer::~Trainer() = default;

int64_t Trainer::start_step() const { return impl_->start_step; }

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
  start_step = restore_state(bytes, origin, *model, *optimizer, device);
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
  set_learning_rate(*optimizer, learning_rate(opts, step));
  reducer->zero_grad(stop || batch == nullptr);
  torch::Tensor loss;
  if (batch) {
    Autocast amp(opts.amp == "bf16", device.is_cuda());
    loss = model->loss(model->forward(batch->x), batch->y).to(torch::kFloat32);
  }
  if (loss.defined()) loss.backward();
  clock.mark(StepClock::kForwardBackward);
  const bool stopping = reducer->finish();
  clock.mark(StepClock::kCommunication);
  if (stopping) return false;
  if (opts.clip_grad_norm > 0) reducer->clip_grad_norm(opts.clip_grad_norm);
  optimizer->step();
  clock.mark(StepClock::kOptimizer);
  losses.push_back(loss.detach());
  return true;
}

void Trainer::Impl::log_line(const LogPoint& p) const {
  if (dist.rank != 0) return;
  spdlog::info("step={} loss={:.4f} samples_per_sec={:.1f} data_wait_pct={:.1f} lr={:.6g}", p.step, p.loss,
               p.samples_per_sec, p.data_wait_pct, p.lr);
}

std::string Trainer::Impl::save_checkpoint(int64_t step) {
  if (dist.rank != 0 || paths.checkpoint_dir.empty()) return {};
  write_checkpoint(paths.checkpoint_dir, step, serialize_state(*model, *optimizer, step), opts.keep_checkpoints);
  spdlog::info("checkpoint at step {} in {}", step, paths.checkpoint_dir);
  return paths.checkpoint_dir;
}

// The final model in a form Python uses directly (model.pt: a TorchScript module or a
// state dict under torchvision's names), and model.json saying what it is and how to
// load it.
std::string Trainer::Impl::save_model() {
  if (dist.rank != 0 || paths.model_dir.empty()) return {};
  std::filesystem::create_directories(paths.model_dir);
  nlohmann::json meta = model->save_for_python(paths.model_dir);
  meta["model"] = opts.model;
  meta["num_classes"] = info.num_classes;
  meta["dataset"] = info.name;
  meta["file"] = "model.pt";
  meta["input"] = {{"shape", info.sample_shape},
                   {"dtype", "float32"},
                   {"scaling", info.dtype == data::DType::kUInt8 ? "uint8 pixels / 255" : "as the pipeline makes them"},
                   {"mean", info.mean},
                   {"std", info.std}};
  write_file_atomically(paths.model_dir + "/model.json", meta.dump(2) + "\n");
  return paths.model_dir + "/model.pt";
}

double Trainer::evaluate() {
  Impl& m = *impl_;
  m.sync_buffers();
  const EvalCounts c =
      evaluate_shard(*m.model, m.eval, m.dist.rank, m.dist.world, m.device, m.format, m.eval_progress);
  const std::vector<int64_t> total = m.collective->sum({c.correct, c.samples});
  return total[1] ? static_cast<double>(total[0]) / static_cast<double>(total[1]) : 0.0;
}

namespace {

// Per-step losses stay on the device until a log step reads them all at once. Throws
// Diverged at the first loss that is not finite.
void flush_losses(std::vector<torch::Tensor>& pending, std::vector<double>& out) {
  if (pending.empty()) return;
  const torch::Tensor host = torch::stack(pending).to(torch::kCPU, torch::kFloat64);
  pending.clear();
  for (int64_t i = 0; i < host.numel(); ++i) {
    const double loss = host.data_ptr<double>()[i];
    if (!std::isfinite(loss)) {
      throw Diverged("the loss became " + std::to_string(loss) + " at step " + std::to_string(out.size() + 1) +
                     " of this run: lower --lr, add --clip-grad-norm or check the data (a source sending "
                     "NaN or garbage); the last good checkpoint is kept");
    }
    out.push_back(loss);
  }
}

}  // namespace

namespace {

StepTimes per_step_ms(const StepTimes& now, const StepTimes& before, int64_t steps) {
  const double k = steps > 0 ? 1000.0 / static_cast<double>(steps) : 0;
  return {(now.data_wait - before.data_wait) * k, (now.host_to_device - before.host_to_device) * k,
          (now.forward_backward - before.forward_backward) * k, (now.communication - before.communication) * k,
          (now.optimizer - before.optimizer) * k};
}

}  // namespace

TrainReport Trainer::run(const NextBatch& next, const std::atomic<bool>& stop, const RunLimits& limits,
                         const RunObserver& observer) {
  Impl& m = *impl_;
  TrainReport r;
  r.device = m.device.str();
  r.model = m.opts.model;
  r.torch_threads = torch::get_num_threads();
  r.rank = m.dist.rank;
  r.world = m.dist.world;
  r.start_step = m.next_step;
  const int64_t end = limits.max_steps < 0 ? m.opts.steps : std::min(m.opts.steps, m.next_step + limits.max_steps);
  const bool reporter = m.dist.rank == 0;
  m.eval_progress = reporter ? observer.on_eval_progress : nullptr;
  auto progress = [&](int64_t step, const char* phase) {
    if (reporter && observer.on_progress) observer.on_progress(step, m.opts.steps, phase);
  };
  DeviceFeed feed(next, m.info, m.device, m.format);
  std::optional<DeviceBatch> resident;
  StepClock clock(m.device);
  std::vector<torch::Tensor> pending;
  const auto start = Clock::now();
  // The log window: training time only (evaluations and checkpoints are paused time).
  auto window_start = start;
  double window_paused = 0;
  int64_t window_samples = 0, window_steps = 0;
  StepTimes window_times;
  int64_t step = m.next_step;
  int64_t completed = step;  // steps whose update the model holds
  // Times `work` (an evaluation, a checkpoint) as paused, not training, time.
  auto paused = [&](const char* phase, const std::function<void()>& work) {
    progress(completed, phase);
    const auto t0 = Clock::now();
    work();
    progress(completed, "train");
    const double s = seconds_since(t0);
    r.paused_seconds += s;
    window_paused += s;
    clock.interrupt();
  };
  try {
    if (step < end) feed.prefetch();
    if (limits.resident) resident = feed.take();
    const bool alone = m.dist.world <= 1;
    for (; step < end; ++step) {
      if (alone && stop.load()) {
        r.interrupted = true;
        break;
      }
      std::optional<DeviceBatch> batch = limits.resident ? resident : feed.take();
      if (!batch && alone) {
        r.interrupted = stop.load();  // a stop closes the feed
        break;
      }
      clock.start_step();
      // Ranks of a group agree on stopping at every step, through the gradient sync.
      if (!m.train_step(batch ? &*batch : nullptr, stop.load(), step, clock, pending)) {
        r.interrupted = true;
        break;
      }
      completed = step + 1;
      r.samples += batch->size;
      window_samples += batch->size;
      ++window_steps;
      const int64_t done = step + 1;
      progress(done, "train");
      // The next batch travels while the device computes this step.
      if (done < end && !limits.resident) feed.prefetch();
      std::optional<LogPoint> point;
      if (done % m.opts.log_every == 0 || done == end) {
        flush_losses(pending, r.losses);
        const double window_wait = add_times(r.step_times, clock.drain(), feed.drain_times(), m.device.is_cuda());
        const double train_s = std::max(seconds_since(window_start) - window_paused, 1e-9);
        point = LogPoint{};
        point->step = done;
        point->total_steps = m.opts.steps;
        point->elapsed_s = seconds_since(start);
        point->window_s = train_s;
        point->samples_per_sec_per_rank = static_cast<double>(window_samples) / train_s;
        point->samples_per_sec = point->samples_per_sec_per_rank * m.dist.world;
        point->data_wait_pct = 100.0 * window_wait / train_s;
        point->loss = r.losses.back();
        point->lr = learning_rate(m.opts, step);
        point->step_ms = per_step_ms(r.step_times, window_times, window_steps);
        if (observer.log_lines) m.log_line(*point);
        window_start = Clock::now();
        window_paused = 0;
        window_samples = window_steps = 0;
        window_times = r.step_times;
        clock.interrupt();  // the log step's own work is not waiting for data
      }
      const bool last = done == m.opts.steps;
      if (m.eval && (last || (m.opts.eval_every > 0 && done % m.opts.eval_every == 0))) {
        double accuracy = 0;
        paused("eval", [&] { accuracy = evaluate(); });
        r.eval_accuracy = accuracy;
        r.eval_history.emplace_back(done, accuracy);
        if (m.dist.rank == 0) spdlog::info("step={} eval_accuracy={:.4f}", done, accuracy);
        if (!point) {
          point = LogPoint{};
          point->training = false;
          point->step = done;
          point->total_steps = m.opts.steps;
          point->elapsed_s = seconds_since(start);
        }
        point->eval_accuracy = accuracy;
      }
      if (point && reporter && observer.on_log) observer.on_log(*point);
      if (m.opts.checkpoint_every > 0 && done % m.opts.checkpoint_every == 0 && done < m.opts.steps) {
        paused("checkpoint", [&] { r.last_checkpoint = m.save_checkpoint(done); });
      }
    }
    flush_losses(pending, r.losses);
  } catch (const Diverged&) {
    throw;  // the model is no good: keep the last checkpoint
  } catch (const std::exception& e) {
    // Whatever failed (a source, the network), the steps done so far are not lost.
    try {
      const std::string dir = m.save_checkpoint(completed);
      if (!dir.empty()) spdlog::warn("training failed at step {}; checkpoint of step {} written", step, completed);
    } catch (const std::exception& c) {
      spdlog::error("could not write a checkpoint after the failure: {}", c.what());
    }
    throw;
  }
  step = completed;
  add_times(r.step_times, clock.drain(), feed.drain_times(), m.device.is_cuda());
  m.next_step = step;
  if (r.interrupted) r.last_checkpoint = m.save_checkpoint(step);
  else if (limits.max_steps < 0 || step == m.opts.steps) r.model_file = m.save_model();
  r.steps = static_cast<int64_t>(r.losses.size());
  if (!r.losses.empty()) {
    r.first_loss = r.losses.front();
    r.final_loss = r.losses.back();
  }
  r.wall_seconds = seconds_since(start);
  const double training_s = r.wall_seconds - r.paused_seconds;
  r.samples_per_sec = training_s > 0 ? r.samples / training_s : 0;
  r.data_wait_seconds = r.step_times.data_wait;
  if (m.dist.world > 1) {
    r.grad_buckets = m.reducer->bucket_count();
    r.grad_buckets_overlapped = m.reducer->launched_in_backward();
  }
  r.data_wait_fraction = training_s > 0 ? r.data_wait_seconds / training_s : 0;
  m.sync_buffers();
  const std::string mine = checksum(*m.model);
  m.collective->put("checksum/" + std::to_string(m.dist.rank), mine);
  m.collective->barrier();
  if (m.dist.world <= 1) r.param_checksums = {mine};
  else if (m.dist.rank == 0) {
    for (int i = 0; i < m.dist.world; ++i) r.param_checksums.push_back(m.collective->take("checksum/" + std::to_string(i)));
  }
  return r;
}

int cuda_device_count() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

void check_ranks_fit_gpus(int procs) {
  const int gpus = cuda_device_count();
  if (gpus > 0 && procs > gpus) {
    throw ConfigError(std::to_string(procs) + " trainer processes on this host but it has " + std::to_string(gpus) +
                      " GPU(s): give each process its own GPU with --procs-per-host " + std::to_string(gpus) +
                      " or less (0 = one per GPU)");
  }
}

void set_torch_threads(int threads) { torch::set_num_threads(std::max(threads, 1)); }

}  // namespace tandem::training
