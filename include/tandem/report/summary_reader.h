// summary.json read back, typed: the one reader of what rank 0 wrote (run_summary.h, the
// writer) for report.html, simulate's table and anyone else. Runs of older tandems lack
// some fields, and a person may have edited the file: a field that is absent or of the
// wrong type reads as NaN (numbers), empty or false, never as an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/plan/plan_inputs.h"

namespace tandem::report {

// One source of rank 0's batches (summary "workers"; "local" for its own threads).
struct SourceSummary {
  std::string address;
  bool failed = false;
  std::string error;  // why it failed, "" when it did not
  double batches = NAN, samples = NAN, images_per_sec = NAN, share = NAN, compute_seconds = NAN, rejoins = NAN;
};

// Seconds of the whole run in each phase of a step (summary "step_seconds").
struct StepSeconds {
  double data_wait = NAN, host_to_device = NAN, forward_backward = NAN, communication = NAN, optimizer = NAN;
  double script = NAN;  // a script run's own work between batches
};

struct SummaryView {
  std::string model, device, model_file;
  double steps = NAN, epochs = NAN, first_loss = NAN, final_loss = NAN, eval_accuracy = NAN;
  double wall_seconds = NAN, data_wait_fraction = NAN, samples_per_sec = NAN;
  double world_size = NAN, batch_size = NAN, global_batch = NAN;
  double global_samples_per_sec = NAN, per_rank_samples_per_sec = NAN, ceiling_samples_per_sec = NAN;
  bool interrupted = false;
  std::string failure;  // why the run failed ("failure"); "" for a run that finished or was stopped
  double exit_code = NAN;
  std::vector<SourceSummary> sources;
  std::optional<StepSeconds> step_seconds;
  nlohmann::json settings = nlohmann::json::object();  // name -> value, as written (a table to show)
  plan::PlanInputs plan_inputs;                        // plan::read_plan_inputs
};

// Reads `summary` (a JSON object; anything else reads as an empty view).
SummaryView read_summary(const nlohmann::json& summary);

// The global rate: throughput's, else samples_per_sec x world_size (older summaries).
double global_rate(const SummaryView& s);

}  // namespace tandem::report
