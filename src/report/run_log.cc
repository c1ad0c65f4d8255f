#include "tandem/report/run_log.h"

#include "tandem/common/environment.h"
#include "tandem/report/scaling.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

namespace tandem::report {

MetricsLog::MetricsLog(std::string path, bool append, uint64_t steps_per_epoch)
    : path_(std::move(path)), out_(path_, append), steps_per_epoch_(steps_per_epoch) {}

void MetricsLog::add_tensorboard(const std::string& dir) {
  try {
    tensorboard_ = std::make_unique<TensorBoardLog>(dir);
  } catch (const std::exception& e) {
    spdlog::warn("no TensorBoard events for this run: {}", e.what());
  }
}

namespace {

// A metrics line's scalars, as TensorBoard tags.
std::vector<std::pair<std::string, double>> scalars_of(const nlohmann::json& line) {
  std::vector<std::pair<std::string, double>> out;
  for (const char* key : {"loss", "lr", "samples_per_sec", "data_wait_pct", "eval_accuracy"}) {
    const auto it = line.find(key);
    if (it != line.end() && it->is_number()) out.emplace_back(key, it->get<double>());
  }
  if (const auto sources = line.find("sources"); sources != line.end()) {
    for (const nlohmann::json& s : *sources) out.emplace_back("source_share/" + s["name"].get<std::string>(), s["share"]);
  }
  return out;
}

// The live workers, and tandem_workers_wanted (feed/scaling.h) at kTargetDataWait: the
// loop's ceiling over the window (every rank's), what the hosts' own threads made (rank
// 0's, times the ranks), and each live worker's capacity.
void add_scaling(nlohmann::json& line, const LogPoint& p, const std::vector<SourceStats>& sources,
                 double local_rate) {
  ScalingInputs in;
  const double wait = std::clamp(p.data_wait_pct / 100, 0.0, 0.99);
  in.ceiling = p.samples_per_sec / (1 - wait);
  const double ranks = p.samples_per_sec_per_rank > 0 ? p.samples_per_sec / p.samples_per_sec_per_rank : 1;
  in.local = local_rate * ranks;
  in.target_wait = kTargetDataWait;
  int live = 0;
  for (const auto& s : sources) {
    if (s.name == kLocalSource || s.failed || !s.left.empty()) continue;
    ++live;
    in.capacities.push_back(worker_capacity(s));
  }
  line["workers"] = live;
  if (const std::optional<int> wanted = workers_wanted(in)) line["workers_wanted"] = *wanted;
}

}  // namespace

nlohmann::json MetricsLog::last() const {
  std::lock_guard lock(last_mu_);
  return last_;
}

void MetricsLog::write(const LogPoint& p, const std::vector<SourceStats>& sources) {
  nlohmann::json line = {{"step", p.step}, {"total_steps", p.total_steps}, {"elapsed_s", p.elapsed_s}};
  if (steps_per_epoch_ > 0) line["epoch"] = static_cast<double>(p.step) / static_cast<double>(steps_per_epoch_);
  if (p.training) {
    line["samples_per_sec"] = p.samples_per_sec;
    line["samples_per_sec_per_rank"] = p.samples_per_sec_per_rank;
    line["data_wait_pct"] = p.data_wait_pct;
    line["loss"] = p.loss;
    line["lr"] = p.lr;
    line["step_ms"] = {{"data_wait", p.step_ms.data_wait},
                       {"host_to_device", p.step_ms.host_to_device},
                       {"forward_backward", p.step_ms.forward_backward},
                       {"communication", p.step_ms.communication},
                       {"optimizer", p.step_ms.optimizer}};
    // Per source, since the previous line: this rank's batches.
    // (A worker that left and joined again is a new source of the same name: its count
    // starts again, never below what was counted before.)
    auto since = [&](const SourceStats& s) { return s.batches - std::min(batches_before_[s.name], s.batches); };
    uint64_t total = 0;
    for (const auto& s : sources) total += since(s);
    const double window = p.window_s;
    double local_rate = 0;  // this rank's own threads, samples/s
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : sources) {
      const uint64_t batches = since(s);
      const double per_batch = s.batches ? static_cast<double>(s.samples) / static_cast<double>(s.batches) : 0;
      const double rate = window > 0 ? batches * per_batch / window : 0.0;
      if (s.name == kLocalSource) local_rate = rate;
      out.push_back({{"name", s.name},
                     {"batches", batches},
                     {"images_per_sec", rate},
                     {"share", total ? static_cast<double>(batches) / static_cast<double>(total) : 0.0}});
      if (const double c = worker_capacity(s); c > 0 && s.name != kLocalSource) out.back()["capacity"] = c;
      if (s.failed || !s.left.empty()) out.back()["serving"] = false;
      batches_before_[s.name] = s.batches;
    }
    line["sources"] = std::move(out);
    line["window_s"] = p.window_s;
    add_scaling(line, p, sources, local_rate);
  }
  if (p.eval_accuracy) line["eval_accuracy"] = *p.eval_accuracy;
  out_.write(line.dump() + "\n");
  {
    std::lock_guard lock(last_mu_);
    if (p.training) last_ = line;
  }
  if (tensorboard_) tensorboard_->scalars(p.step, scalars_of(line));
}

namespace {

std::string clock_text(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

// Routes every log message through the status line: clear it, log, draw it again.
class StatusSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  StatusSink(StatusLine& line, std::vector<spdlog::sink_ptr> inner) : line_(line), inner_(std::move(inner)) {}
  const std::vector<spdlog::sink_ptr>& inner() const { return inner_; }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::lock_guard lock(line_.mu_);
    line_.clear_locked();
    for (auto& s : inner_) {
      if (s->should_log(msg.level)) s->log(msg);
    }
    for (auto& s : inner_) s->flush();
    line_.draw_locked(true);
  }
  void flush_() override {
    for (auto& s : inner_) s->flush();
  }

 private:
  StatusLine& line_;
  std::vector<spdlog::sink_ptr> inner_;
};

bool StatusLine::wanted(bool quiet) {
  return !quiet && ::isatty(STDERR_FILENO) == 1 && process_env("TERM").value_or("") != "dumb";
}

StatusLine::StatusLine() : start_(std::chrono::steady_clock::now()) {
  auto logger = spdlog::default_logger();
  auto sink = std::make_shared<StatusSink>(*this, logger->sinks());
  logger->sinks() = {sink};
  sink_ = sink;
}

StatusLine::~StatusLine() {
  {
    std::lock_guard lock(mu_);
    if (shown_) std::fputc('\n', stderr);
    shown_ = false;
  }
  spdlog::default_logger()->sinks() = sink_->inner();
}

void StatusLine::progress(int64_t step, int64_t total, const char* phase) {
  std::lock_guard lock(mu_);
  const bool changed = phase_ != phase;
  if (changed) eval_fraction_ = -1;
  if (first_step_ < 0) first_step_ = step > 0 ? step - 1 : 0;
  step_ = step;
  total_ = total;
  phase_ = phase;
  draw_locked(changed);
}

void StatusLine::eval_progress(int64_t done, int64_t total) {
  std::lock_guard lock(mu_);
  eval_fraction_ = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0;
  draw_locked(false);
}

void StatusLine::metrics(const LogPoint& p) {
  std::lock_guard lock(mu_);
  if (!p.training) return;
  samples_per_sec_ = p.samples_per_sec;
  data_wait_pct_ = p.data_wait_pct;
  loss_ = p.loss;
  have_metrics_ = true;
  draw_locked(true);
}

std::string StatusLine::text() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double pct = total_ > 0 ? 100.0 * static_cast<double>(step_) / static_cast<double>(total_) : 0;
  char head[96];
  std::snprintf(head, sizeof head, "step %lld/%lld %.0f%%", static_cast<long long>(step_),
                static_cast<long long>(total_), pct);
  std::string out = std::string(head) + " | " + clock_text(elapsed);
  const int64_t done = step_ - std::max<int64_t>(first_step_, 0);
  if (done > 0 && total_ > step_) out += ", ETA " + clock_text(elapsed / static_cast<double>(done) * (total_ - step_));
  if (phase_ == "eval") {
    if (eval_fraction_ < 0) return out + " | evaluating";
    char eval[48];
    std::snprintf(eval, sizeof eval, " | evaluating %.0f%%", 100 * eval_fraction_);
    return out + eval;
  }
  if (phase_ != "train") return out + " | writing a checkpoint";
  if (have_metrics_) {
    char tail[128];
    std::snprintf(tail, sizeof tail, " | %.0f samples/s | data wait %.1f%% | loss %.3f", samples_per_sec_,
                  data_wait_pct_, loss_);
    out += tail;
  }
  return out;
}

void StatusLine::clear_locked() {
  if (shown_) std::fputs("\r\x1b[2K", stderr);
  shown_ = false;
}

void StatusLine::draw_locked(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && shown_ && now - last_draw_ < std::chrono::milliseconds(250)) return;
  last_draw_ = now;
  std::fputs(("\r\x1b[2K" + text()).c_str(), stderr);
  std::fflush(stderr);
  shown_ = true;
}

}  // namespace tandem::report
