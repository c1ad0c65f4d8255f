// What `tandem plan` reads from a run's summary.json: the training loop's ceiling, the
// preprocessing rates measured on the trainer hosts and on the data workers, and the
// instance types the run used (see docs/plan.md for the fields).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::plan {

// The user's choices; each empty/unset field falls back to the summary.
struct PlanOptions {
  std::string trainer_type;       // overrides plan_inputs.trainer_instance_type
  std::string worker_type;        // overrides plan_inputs.worker_instance_type
  std::optional<double> ceiling;  // overrides throughput.ceiling_samples_per_sec (samples/s)
  double within_pct = 5.0;        // "fastest within X% of the cheapest"
  int max_workers = 64;           // the table stops here when the ceiling is further
};

// The measurements, for the whole job unless said otherwise.
struct RunMeasurements {
  std::string trainer_type;           // "" when neither the summary nor the options say
  std::string worker_type;            // the same
  std::string run_worker_type;        // the worker type the run used ("" when unknown)
  int trainer_hosts = 1;
  double global_batch = 0.0;          // samples per step
  double ceiling = 0.0;               // samples/s
  double local = 0.0;                 // samples/s of the trainer hosts' own preprocessing
  int local_threads = 0;              // per trainer host
  double images_per_cpu_second = 0.0; // the per-thread rate the worker estimate scales
  bool rate_from_workers = false;     // false: measured on the trainer host (no workers ran)
  int rate_threads = 0;               // threads the rate was measured over
  int run_workers = 0;                // worker instances in the run
  double run_samples_per_sec = 0.0;   // the run's measured whole-job rate (0 when unknown)
  std::string cpu_model;              // the trainer host's CPU ("" when unknown)
  std::string rate_hosts;             // where the rate was measured, e.g. "algo-2, algo-3"
  bool simulated = false;             // `simulate`: every "host" ran on this machine's CPU (cpu_model)
};

// Reads and checks the summary. Throws ConfigError naming the missing or bad field and
// the fix (re-run with a newer tandem, or the option that supplies it).
RunMeasurements read_measurements(const nlohmann::json& summary, const PlanOptions& options);

}  // namespace tandem::plan
