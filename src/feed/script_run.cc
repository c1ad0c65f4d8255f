#include "tandem/feed/script_run.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/common/cpu_time.h"
#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/report/summary.h"
#include "tandem/transport/live_metrics.h"

namespace tandem::feed {
namespace {

using report::LogPoint;
using report::MetricsLog;
using report::TrainReport;

// `base` with `more` added, source by source (by name): counts add up, the latest
// failure state stays.
std::vector<SourceStats> added(std::vector<SourceStats> base, const std::vector<SourceStats>& more) {
  for (const SourceStats& s : more) {
    auto it = std::find_if(base.begin(), base.end(), [&](const SourceStats& b) { return b.name == s.name; });
    if (it == base.end()) {
      base.push_back(s);
      continue;
    }
    it->batches += s.batches;
    it->samples += s.samples;
    it->compute_seconds += s.compute_seconds;
    it->rejoins += s.rejoins;
    it->ahead += s.ahead;
    it->deepest = std::max(it->deepest, s.deepest);
    it->failed = s.failed;
    if (!s.error.empty()) it->error = s.error;
  }
  return base;
}

// The mean of values[from, to); NaN when that is empty.
double mean_of(const std::vector<double>& values, size_t from, size_t to) {
  if (to <= from) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += values[i];
  return sum / static_cast<double>(to - from);
}

// Who started this process's ranks: the launch the launcher named, else the parent process.
std::string launcher_id(const std::string& launch) {
  return (launch.empty() ? std::to_string(::getppid()) : launch) + "\n";
}

std::filesystem::path rank_mark(const std::string& summary_path, int rank) {
  return std::filesystem::path(summary_path).parent_path() / "ranks" / ("rank-" + std::to_string(rank));
}

}  // namespace

void mark_rank_training(const std::string& summary_path, int rank, const std::string& launch) {
  try {
    write_file_atomically(rank_mark(summary_path, rank).string(), launcher_id(launch));
  } catch (const std::exception&) {
  }
}

int ranks_training(const std::string& summary_path, int world, int local_world, const std::string& launch) {
  const std::string launcher = launcher_id(launch);
  int ranks = world;
  for (int r = 1; r < std::min(world, local_world); ++r) {
    if (read_file(rank_mark(summary_path, r).string()) != launcher) --ranks;
  }
  return ranks;
}

ScriptRun::ScriptRun(ScriptRunOptions opts) : opts_(std::move(opts)) {
  const std::filesystem::path dir = std::filesystem::path(opts_.summary_path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  metrics_ = std::make_unique<MetricsLog>((dir / "metrics.jsonl").string(), opts_.append_metrics, opts_.steps_per_epoch);
  metrics_server_ =
      transport::serve_metrics(opts_.metrics_port, opts_.metrics_bind,
                               [this] { return live_metrics_.page(metrics_->last(), in_flight_); });
  metrics_->add_tensorboard(report::tensorboard_dir(opts_.sagemaker_root, dir.string()));
}

void ScriptRun::waiting() {
  const Clock::time_point now = Clock::now();
  if (paused_) {  // a feed's first request: its step starts here
    if (steps_ == 0) {
      first_ = now;
      startup_s_ = process_age_seconds();
    }
    mark_ = now;
    paused_ = false;
  }
  if (!asking_) asked_ = now;  // a wait comes in slices of next(): it started at the first
  asking_ = true;
}

void ScriptRun::taken(uint64_t samples, uint64_t step, uint64_t total_steps,
                      const std::function<std::vector<SourceStats>()>& sources) {
  const Clock::time_point now = Clock::now();
  const double step_s = seconds_between(mark_, now), wait_s = seconds_between(asked_, now);
  mark_ = now;
  asking_ = false;
  if (steps_ == 0) start_step_ = step;
  ++steps_;
  samples_ += samples;
  training_s_ += step_s;
  wait_s_ += wait_s;
  ++window_steps_;
  window_samples_ += samples;
  window_s_ += step_s;
  window_wait_s_ += wait_s;
  if (window_steps_ >= static_cast<uint64_t>(std::max(opts_.log_every, 1))) log_point(step + 1, total_steps, sources());
}

void ScriptRun::log_point(uint64_t step, uint64_t total_steps, const std::vector<SourceStats>& sources) {
  LogPoint p;
  p.step = static_cast<int64_t>(step);
  p.total_steps = static_cast<int64_t>(total_steps);
  p.elapsed_s = seconds_between(first_, mark_);
  p.window_s = window_s_;
  p.samples_per_sec_per_rank = window_s_ > 0 ? static_cast<double>(window_samples_) / window_s_ : 0;
  p.samples_per_sec = p.samples_per_sec_per_rank * ranks();
  p.data_wait_pct = window_s_ > 0 ? 100 * window_wait_s_ / window_s_ : 0;
  if (losses_.size() > window_first_loss_) {  // the script's own, over the window: NaN unless it reported some
    last_loss_ = mean_of(losses_, window_first_loss_, losses_.size());
    window_first_loss_ = losses_.size();
  }
  p.loss = last_loss_;
  p.lr = last_lr_;
  p.step_ms.data_wait = 1000 * window_wait_s_ / static_cast<double>(window_steps_);
  metrics_->write(p, added(sources_, sources));
  if (logged_windows_++ > 0) {  // not the first window: no warm-up in it
    steady_samples_ += static_cast<double>(window_samples_);
    steady_busy_s_ += std::max(window_s_ - window_wait_s_, 0.0);
  }
  // The trainer's metric line, so that the same metric definitions (CloudWatch) read it.
  spdlog::info("step={}{} samples_per_sec={:.1f} data_wait_pct={:.1f}{}", p.step,
               std::isfinite(p.loss) ? fmt::format(" loss={:.4f}", p.loss) : std::string(), p.samples_per_sec,
               p.data_wait_pct, std::isfinite(p.lr) ? fmt::format(" lr={:.6g}", p.lr) : std::string());
  window_steps_ = window_samples_ = 0;
  window_s_ = window_wait_s_ = 0;
}

void ScriptRun::feed_ended(const std::vector<SourceStats>& sources, uint64_t hedged) {
  paused_ = true;
  asking_ = false;
  sources_ = added(std::move(sources_), sources);
  hedged_ += hedged;
}

TrainReport ScriptRun::report() const {
  TrainReport r;
  r.start_step = static_cast<int64_t>(start_step_);
  r.steps = static_cast<int64_t>(steps_);
  r.samples = static_cast<int64_t>(samples_);
  r.wall_seconds = steps_ ? seconds_between(first_, mark_) : 0;
  r.paused_seconds = std::max(r.wall_seconds - training_s_, 0.0);  // between feeds
  r.startup_seconds = startup_s_;
  r.samples_per_sec = training_s_ > 0 ? static_cast<double>(samples_) / training_s_ : 0;
  r.data_wait_seconds = wait_s_;
  r.data_wait_fraction = training_s_ > 0 ? wait_s_ / training_s_ : 0;
  r.steady_samples = steady_samples_;
  r.steady_busy_seconds = steady_busy_s_;
  r.step_times.data_wait = wait_s_;
  r.step_times.script = std::max(training_s_ - wait_s_, 0.0);
  // NaN unless the script reported losses (feed.log(loss=...)): means over a log window,
  // as the metric lines smooth them, or over half the run when it is shorter than two.
  const size_t n = losses_.size();
  const size_t w = std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(std::max(opts_.log_every, 1)), n / 2));
  r.first_loss = mean_of(losses_, 0, std::min(w, n));
  r.final_loss = mean_of(losses_, n - std::min(w, n), n);
  r.interrupted = interrupted_;
  r.device = "the script's own";
  r.model = "(the script's)";
  r.rank = opts_.rank;
  r.world = ranks();
  return r;
}

void ScriptRun::check_reported(const std::string& name, double value) {
  if (name != "loss" && name != "lr") {
    throw ConfigError("feed.log() takes loss= and lr= (what the metric lines and the summary carry), not " +
                      printable(name, 40) + "=");
  }
  if (!std::isfinite(value)) throw ConfigError("feed.log(" + name + "=...) got " + fmt::format("{}", value) + ": give a finite number");
}

void ScriptRun::reported(const std::string& name, double value) {
  check_reported(name, value);
  if (name == "loss") {
    losses_.push_back(value);
  } else {
    last_lr_ = value;
  }
}

std::string ScriptRun::write_summary(RunSummaryFacts facts) const {
  facts.sources = sources_;
  facts.hedged = hedged_;
  nlohmann::json summary = run_summary(report(), facts);
  summary["metrics_file"] = metrics_->path();
  report::write_summary_and_report(opts_.summary_path, summary);
  return opts_.summary_path;
}

}  // namespace tandem::feed
