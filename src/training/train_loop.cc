// Trainer::run: the training loop (trainer_impl.h has the state it works on), in three
// parts: the steps (RunLoop::train), what is due after a step (the schedule of logs,
// evaluations and checkpoints), and the end-of-run record (RunLoop::finish).
#include <cmath>
#include <optional>

#include <spdlog/spdlog.h>

#include "autocast.h"
#include "optim.h"
#include "checkpoint_schedule.h"
#include "tandem/common/cpu_time.h"
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

StepTimes per_step_ms(const StepTimes& now, const StepTimes& before, int64_t steps) {
  const double k = steps > 0 ? 1000.0 / static_cast<double>(steps) : 0;
  return {(now.data_wait - before.data_wait) * k, (now.host_to_device - before.host_to_device) * k,
          (now.forward_backward - before.forward_backward) * k, (now.communication - before.communication) * k,
          (now.optimizer - before.optimizer) * k};
}

// What is due once step `done` (1-based) has completed.
struct Due {
  bool log = false;
  bool eval = false;
  bool checkpoint = false;
};

Due due_after(const LoopOptions& o, const CheckpointSchedule& c, int64_t done, int64_t end, bool has_eval) {
  const bool last = done == o.steps;
  return {done % o.log_every == 0 || done == end,
          has_eval && (last || (o.eval_every > 0 && done % o.eval_every == 0)),
          c.due(done)};
}

// The log window: samples, steps and phase times since the last log point, over training
// time only (evaluations and checkpoints are paused time).
struct LogWindow {
  Clock::time_point start = Clock::now();
  double paused = 0;
  int64_t samples = 0, steps = 0;
  StepTimes times_before;

  void reset(const StepTimes& now) {
    start = Clock::now();
    paused = 0;
    samples = steps = 0;
    times_before = now;
  }
};

}  // namespace

// One call of Trainer::run: `loop` says how far and when to log and evaluate,
// `checkpoints` when to checkpoint.
class RunLoop {
 public:
  RunLoop(Trainer& trainer, Trainer::Impl& m, const LoopOptions& loop, const CheckpointOptions& checkpoints,
          const NextBatch& next, const std::atomic<bool>& stop, const RunLimits& limits, const RunObserver& observer)
      : trainer_(trainer), m_(m), loop_(loop),
        schedule_(checkpoints, m.next_step, loop.steps), stop_(stop), limits_(limits),
        observer_(observer), feed_(next, m.info, m.device, m.format), clock_(m.device), step_(m.next_step),
        completed_(m.next_step) {
    r_.device = m.device.str();
    r_.model = m.config.model.name;
    r_.torch_threads = torch::get_num_threads();
    r_.rank = m.dist.rank;
    r_.world = m.dist.world;
    r_.start_step = m.next_step;
    end_ = limits.max_steps < 0 ? loop.steps : std::min(loop.steps, m.next_step + limits.max_steps);
    m.eval_progress = reporter() ? observer.on_eval_progress : nullptr;
  }

  // Steps until the end, a stop, or the end of the batches. Throws what a step threw.
  void train() {
    if (step_ < end_) feed_.prefetch();
    if (limits_.resident) resident_ = feed_.take();
    for (; step_ < end_; ++step_) {
      if (!step_once()) break;
      after_step(step_ + 1);
    }
    flush_losses(pending_, r_.losses);
  }

  // After a failure (a source, the network): the steps done so far are not lost. Before
  // this run's first step there is nothing to keep: a checkpoint of the step it started
  // from would only stand in the way of the next run (another model, other settings).
  void keep_progress() {
    if (completed_ == r_.start_step) {
      if (m_.dist.rank == 0) spdlog::warn("training failed before its first step: no checkpoint written");
      return;
    }
    try {
      const std::string dir = checkpoint(completed_);
      if (!dir.empty()) {
        spdlog::warn("training failed after completing step {}; checkpoint of step {} written in {}", completed_,
                     completed_, dir);
      }
    } catch (const std::exception& c) {
      spdlog::error("could not write a checkpoint after the failure: {}", c.what());
    }
  }

  TrainReport finish();

 private:
  void save_final_model();
  // --checkpoint-every auto: rank 0's first checkpoint sets the interval (CheckpointSchedule).
  void auto_interval(int64_t done) {
    const double trained_s = seconds_since(start_) - r_.paused_seconds;
    const double step_s = trained_s / static_cast<double>(std::max<int64_t>(done - r_.start_step, 1));
    const std::string line = schedule_.measured(done, r_.checkpoint_seconds / r_.checkpoints, step_s);
    if (!line.empty()) spdlog::info("{}", line);
  }
  // A checkpoint of step `step` (Trainer::Impl::save_checkpoint), timed: the plan's
  // checkpoint cost (checkpoint_seconds).
  std::string checkpoint(int64_t step) {
    const auto t0 = Clock::now();
    std::string dir = m_.save_checkpoint(step);
    if (!dir.empty()) {
      r_.checkpoint_seconds += seconds_since(t0);
      ++r_.checkpoints;
    }
    return dir;
  }
  // A checkpoint that may fail without ending the run (a disk full for a while): the
  // periodic ones, whose next is due soon, and the one at a stop, after which the run
  // resumes from the newest one written. Logged, with the step it resumes from.
  std::string checkpoint_or_warn(int64_t step, const char* when) {
    try {
      return checkpoint(step);
    } catch (const std::exception& e) {
      spdlog::error("could not write the checkpoint of step {} ({}): {}; {}", step, when, e.what(),
                    r_.last_checkpoint.empty() ? "no earlier checkpoint of this run is kept"
                                               : "the newest kept is in " + r_.last_checkpoint);
      return r_.last_checkpoint;
    }
  }
  bool reporter() const { return m_.dist.rank == 0; }
  bool alone() const { return m_.dist.world <= 1; }
  void progress(int64_t step, const char* phase) {
    if (reporter() && observer_.on_progress) observer_.on_progress(step, loop_.steps, phase);
  }

  // One step; false when training stops here (a stop, the end of the batches).
  bool step_once() {
    if (alone() && stop_.load()) {
      r_.interrupted = true;
      return false;
    }
    std::optional<DeviceBatch> batch = limits_.resident ? resident_ : feed_.take();
    if (!batch && alone()) {
      r_.interrupted = stop_.load();  // a stop closes the feed
      return false;
    }
    clock_.start_step();
    const Clock::time_point started = Clock::now();
    // Ranks of a group agree on stopping at every step, through the gradient sync.
    if (!m_.train_step(batch ? &*batch : nullptr, stop_.load(), step_, clock_, pending_)) {
      r_.interrupted = true;
      return false;
    }
    pad_step(started, loop_.step_ms);
    completed_ = step_ + 1;
    r_.samples += batch->size;
    window_.samples += batch->size;
    ++window_.steps;
    progress(completed_, "train");
    // The next batch travels while the device computes this step.
    if (completed_ < end_ && !limits_.resident) feed_.prefetch();
    return true;
  }

  void after_step(int64_t done) {
    const Due due = due_after(loop_, schedule_, done, end_, m_.eval != nullptr);
    std::optional<LogPoint> point;
    if (due.log) point = log_point(done);
    if (due.eval) evaluate_at(done, point);
    if (point && reporter() && observer_.on_log) observer_.on_log(*point);
    if (due.checkpoint) {
      paused("checkpoint",
             [&] { r_.last_checkpoint = checkpoint_or_warn(done, "training goes on, the next is due later"); });
      if (r_.checkpoints > 0) auto_interval(done);
    }
  }

  // Closes the log window at step `done`.
  LogPoint log_point(int64_t done) {
    flush_losses(pending_, r_.losses);
    const double window_wait = add_times(r_.step_times, clock_.drain(), feed_.drain_times(), m_.device.is_cuda());
    const double train_s = std::max(seconds_since(window_.start) - window_.paused, 1e-9);
    LogPoint point;
    point.step = done;
    point.total_steps = loop_.steps;
    point.elapsed_s = seconds_since(start_);
    point.window_s = train_s;
    point.samples_per_sec_per_rank = static_cast<double>(window_.samples) / train_s;
    point.samples_per_sec = point.samples_per_sec_per_rank * m_.dist.world;
    point.data_wait_pct = 100.0 * window_wait / train_s;
    point.loss = r_.losses.back();
    point.lr = learning_rate(m_.config.optimizer, done - 1);
    point.step_ms = per_step_ms(r_.step_times, window_.times_before, window_.steps);
    if (observer_.log_lines) m_.log_line(point);
    if (done - window_.steps > r_.start_step) {  // not the first window: no warm-up in it
      r_.steady_samples += static_cast<double>(window_.samples);
      r_.steady_busy_seconds += std::max(train_s - window_wait, 0.0);
    }
    window_.reset(r_.step_times);
    clock_.interrupt();  // the log step's own work is not waiting for data
    return point;
  }

  void evaluate_at(int64_t done, std::optional<LogPoint>& point) {
    double accuracy = 0;
    paused("eval", [&] { accuracy = trainer_.evaluate(); });
    r_.eval_accuracy = accuracy;
    r_.eval_history.emplace_back(done, accuracy);
    if (reporter()) spdlog::info("step={} eval_accuracy={:.4f}", done, accuracy);
    if (!point) {
      point = LogPoint{};
      point->training = false;
      point->step = done;
      point->total_steps = loop_.steps;
      point->elapsed_s = seconds_since(start_);
    }
    point->eval_accuracy = accuracy;
  }

  // Times `work` (an evaluation, a checkpoint) as paused, not training, time.
  void paused(const char* phase, const std::function<void()>& work) {
    progress(completed_, phase);
    const auto t0 = Clock::now();
    work();
    progress(completed_, "train");
    const double s = seconds_since(t0);
    r_.paused_seconds += s;
    window_.paused += s;
    clock_.interrupt();
  }

  void record_totals();
  void agree_on_parameters();

  Trainer& trainer_;
  Trainer::Impl& m_;
  const LoopOptions& loop_;
  CheckpointSchedule schedule_;
  const std::atomic<bool>& stop_;
  const RunLimits& limits_;
  const RunObserver& observer_;
  TrainReport r_;
  DeviceFeed feed_;
  std::optional<DeviceBatch> resident_;
  StepClock clock_;
  std::vector<torch::Tensor> pending_;
  const Clock::time_point start_ = Clock::now();
  const double startup_s_ = process_age_seconds();
  LogWindow window_;
  int64_t end_ = 0;
  int64_t step_;       // the step being trained
  int64_t completed_;  // steps whose update the model holds
};

// The run's totals: losses, times, throughput, buckets.
void RunLoop::record_totals() {
  add_times(r_.step_times, clock_.drain(), feed_.drain_times(), m_.device.is_cuda());
  r_.compute_dtype = m_.compute_dtype;
  r_.memory_layout = m_.memory_layout;
  r_.steps = static_cast<int64_t>(r_.losses.size());
  if (!r_.losses.empty()) {
    r_.first_loss = r_.losses.front();
    r_.final_loss = r_.losses.back();
  }
  r_.wall_seconds = seconds_since(start_);
  r_.startup_seconds = startup_s_;
  const double training_s = r_.wall_seconds - r_.paused_seconds;
  r_.samples_per_sec = training_s > 0 ? r_.samples / training_s : 0;
  r_.data_wait_seconds = r_.step_times.data_wait;
  r_.data_wait_fraction = training_s > 0 ? r_.data_wait_seconds / training_s : 0;
  if (m_.collective->grouped()) {
    r_.grad_buckets = m_.reducer->bucket_count();
    r_.grad_buckets_overlapped = m_.reducer->launched_in_backward();
  }
}

// Every rank holds rank 0's buffers, and rank 0 gathers every rank's parameter checksum.
void RunLoop::agree_on_parameters() {
  m_.sync_buffers();
  const std::string mine = checksum(*m_.model);
  m_.collective->put("checksum/" + std::to_string(m_.dist.rank), mine);
  m_.collective->barrier();
  if (m_.dist.world <= 1) r_.param_checksums = {mine};
  else if (m_.dist.rank == 0) {
    for (int i = 0; i < m_.dist.world; ++i) {
      r_.param_checksums.push_back(m_.collective->take("checksum/" + std::to_string(i)));
    }
  }
}

// The final model; when it cannot be written (a read-only or full model folder) the
// weights go to a checkpoint of the last step, and the report says where (model_error).
void RunLoop::save_final_model() {
  try {
    r_.model_file = m_.save_model();
    return;
  } catch (const std::exception& e) {
    r_.model_error = std::string("cannot write the trained model: ") + e.what();
  }
  try {
    r_.last_checkpoint = checkpoint(completed_);
    r_.model_error += "; its weights (step " + std::to_string(completed_) + ") are kept in the checkpoint in " +
                      r_.last_checkpoint + ": fix the model folder and start the run again, which resumes at that "
                      "step and writes the model at once";
  } catch (const std::exception& e) {
    r_.model_error += std::string("; nor could its weights be kept in a checkpoint: ") + e.what();
  }
  spdlog::error("{}", r_.model_error);
}

TrainReport RunLoop::finish() {
  m_.next_step = completed_;
  // Stopped before this run's first step: the newest checkpoint (if any) already holds it.
  if (r_.interrupted && completed_ > r_.start_step) {
    r_.last_checkpoint = checkpoint_or_warn(completed_, "stopping: the next run resumes from the newest kept");
  }
  else if (limits_.max_steps < 0 || completed_ == loop_.steps) save_final_model();
  record_totals();
  agree_on_parameters();
  return std::move(r_);
}

TrainReport Trainer::run(const NextBatch& next, const std::atomic<bool>& stop, const RunLimits& limits,
                         const RunObserver& observer) {
  RunLoop loop(*this, *impl_, impl_->config.loop, impl_->config.checkpoints, next, stop, limits, observer);
  try {
    loop.train();
  } catch (const Diverged&) {
    throw;  // the model is no good: keep the last checkpoint
  } catch (const std::exception&) {
    loop.keep_progress();
    throw;
  }
  return loop.finish();
}

}  // namespace tandem::training
