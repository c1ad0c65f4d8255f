// What a trainer shows and keeps as it runs (rank 0): metrics.jsonl, one line per log
// step, and on a terminal one live status line.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/report/record_file.h"
#include "tandem/report/run_records.h"
#include "tandem/report/tensorboard.h"

namespace tandem::report {

class StatusSink;

// Appends one JSON object per LogPoint to `path` (docs/configuration.md, "Metrics"), with
// the epoch and, per source, what it delivered since the previous line.
class MetricsLog {
 public:
  // `append` keeps the lines of an earlier run (a resume); else the file starts empty.
  // Throws std::runtime_error naming the path when it cannot be written.
  MetricsLog(std::string path, bool append, uint64_t steps_per_epoch);

  // Each line from now on goes to TensorBoard too (tensorboard.h), in an event file in
  // `dir`: loss, lr, samples_per_sec, data_wait_pct, eval_accuracy and each source's
  // share (source_share/NAME). Never throws: without it the run goes on, saying why.
  void add_tensorboard(const std::string& dir);

  void write(const LogPoint& point, const std::vector<SourceStats>& sources);
  // The event file, "" without one.
  std::string tensorboard_path() const { return tensorboard_ ? tensorboard_->path() : ""; }

  const std::string& path() const { return path_; }
  // The last training line written (null before the first): what --metrics-port serves.
  // Thread-safe.
  nlohmann::json last() const;

 private:
  std::string path_;
  RecordFile out_;  // a disk full for a while loses no line (record_file.h)
  uint64_t steps_per_epoch_;
  std::map<std::string, uint64_t> batches_before_;  // per source, at the previous line
  std::unique_ptr<TensorBoardLog> tensorboard_;
  mutable std::mutex last_mu_;
  nlohmann::json last_;  // GUARDED_BY(last_mu_)
};

// The data wait tandem_workers_wanted aims under (metrics.jsonl's workers_wanted).
inline constexpr double kTargetDataWait = 0.05;

// The live status line: "step 120/300 40% | 0:42, ETA 1:03 | 5200 samples/s | data wait
// 3.2% | loss 1.930" (or "evaluating"), redrawn at most 4 times a second on stderr. While
// it is shown, log messages clear it first and it is redrawn after them.
class StatusLine {
 public:
  // Whether a status line makes sense: stderr is a terminal, TERM is not "dumb" and the
  // user did not ask for `quiet` (--quiet).
  static bool wanted(bool quiet);

  StatusLine();
  ~StatusLine();  // ends the line and restores the plain log output
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  void progress(int64_t step, int64_t total, const char* phase);
  void metrics(const LogPoint& point);
  void eval_progress(int64_t done, int64_t total);

  // The text of the line, as drawn (for tests).
  std::string text() const;

 private:
  friend class StatusSink;
  void draw_locked(bool force);
  void clear_locked();

  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t step_ = 0, total_ = 0, first_step_ = -1;  // first_step_: where this run started
  std::string phase_ = "train";
  double samples_per_sec_ = 0, data_wait_pct_ = 0, loss_ = 0, eval_fraction_ = -1;
  bool have_metrics_ = false, shown_ = false;
  std::shared_ptr<StatusSink> sink_;  // installed in the default logger; holds its previous sinks
};

}  // namespace tandem::report
