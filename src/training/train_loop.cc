// Trainer::run: the training loop (trainer_impl.h has the state it works on).
#include <cmath>
#include <optional>

#include <spdlog/spdlog.h>

#include "autocast.h"
#include "optim.h"
#include "tandem/common/error.h"
#include "trainer_impl.h"

namespace tandem::training {
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
    // Whatever failed (a source, the network), the steps done so far are not lost. Before
    // this run's first step there is nothing to keep: a checkpoint of the step it started
    // from would only stand in the way of the next run (another model, other settings).
    if (completed == r.start_step) {
      if (m.dist.rank == 0) spdlog::warn("training failed before its first step: no checkpoint written");
      throw;
    }
    try {
      const std::string dir = m.save_checkpoint(completed);
      if (!dir.empty()) {
        spdlog::warn("training failed after completing step {}; checkpoint of step {} written in {}", completed,
                     completed, dir);
      }
    } catch (const std::exception& c) {
      spdlog::error("could not write a checkpoint after the failure: {}", c.what());
    }
    throw;
  }
  step = completed;
  add_times(r.step_times, clock.drain(), feed.drain_times(), m.device.is_cuda());
  m.next_step = step;
  // Stopped before this run's first step: the newest checkpoint (if any) already holds it.
  if (r.interrupted && step > r.start_step) r.last_checkpoint = m.save_checkpoint(step);
  else if (limits.max_steps < 0 || step == m.opts.steps) r.model_file = m.save_model();
  r.compute_dtype = m.compute_dtype;
  r.memory_layout = m.memory_layout;
  r.steps = static_cast<int64_t>(r.losses.size());
  if (!r.losses.empty()) {
    r.first_loss = r.losses.front();
    r.final_loss = r.losses.back();
  }
  r.wall_seconds = seconds_since(start);
  const double training_s = r.wall_seconds - r.paused_seconds;
  r.samples_per_sec = training_s > 0 ? r.samples / training_s : 0;
  r.data_wait_seconds = r.step_times.data_wait;
  if (m.collective->grouped()) {
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

}  // namespace tandem::training
