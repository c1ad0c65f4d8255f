// The one definition of summary.json's "plan_inputs": what the trainer's rank 0 measured
// for `tandem plan` (the preprocessing rates on the trainer hosts and on the data workers,
// and the instance types the run used). The trainer fills a PlanInputs and writes it with
// to_json; `tandem plan` reads it back with read_measurements, the run report with
// read_plan_inputs. docs/plan.md and docs/configuration.md describe the fields.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::plan {

// "local": the trainer hosts' own preprocessing threads.
struct LocalRate {
  int threads = 0;                     // per trainer host (every rank's on that host)
  double images_per_cpu_second = 0.0;  // rank 0's samples per CPU-second spent making them
  double images_per_sec = 0.0;         // what rank 0 received, over training time
  bool operator==(const LocalRate&) const = default;
};

// One entry of "workers": a data worker as rank 0 saw it.
struct WorkerRate {
  std::string address;                 // where the trainer reached it
  std::string host;                    // as the worker names itself; "" = unknown (null)
  std::string instance_type;           // from the cluster description; "" = unknown (null)
  int threads = 0;                     // its preprocessing threads; 0 when it did not answer
  double images_per_cpu_second = 0.0;  // as for LocalRate
  double images_per_sec = 0.0;
  bool operator==(const WorkerRate&) const = default;
};

// "plan_inputs". Empty strings are written as null.
struct PlanInputs {
  std::string trainer_instance_type;
  int trainer_hosts = 1;
  int ranks = 1;                   // the world size
  unsigned trainer_host_cores = 0;  // 0 = unknown
  std::string cpu_model;           // the trainer host's processor
  std::optional<LocalRate> local;  // null: no local threads made batches
  std::vector<WorkerRate> workers;
  std::string worker_instance_type;  // the workers' type (one type per run)
  bool simulated = false;            // `simulate`: every "host" ran on this machine's CPU
  double bytes_per_sample = 0;       // what a sample carried from its source; 0 = unknown
  bool operator==(const PlanInputs&) const = default;
};

// The "plan_inputs" object for summary.json.
nlohmann::json to_json(const PlanInputs& inputs);

// The run's "plan_inputs" for display (the run report): fields that are absent or not of
// their type (older or damaged summaries) keep their defaults. Never throws.
PlanInputs read_plan_inputs(const nlohmann::json& summary);

// The user's choices; each empty/unset field falls back to the summary.
struct PlanOptions {
  std::string trainer_type;       // overrides plan_inputs.trainer_instance_type
  std::string worker_type;        // overrides plan_inputs.worker_instance_type
  std::optional<double> ceiling;  // overrides throughput.ceiling_samples_per_sec (samples/s)
  double within_pct = 5.0;        // "fastest within X% of the cheapest"
  int max_workers = 64;           // the table stops here when the ceiling is further
  int reserve_vcpus_per_rank = 2; // a trainer host's vCPUs each rank's training loop keeps
  int sweep_jobs = 0;             // --sweep-jobs N: also plan N such jobs on one pool; 0 = none
};

// The measurements, for the whole job unless said otherwise.
struct RunMeasurements {
  std::string trainer_type;           // "" when neither the summary nor the options say
  std::string worker_type;            // the same
  std::string run_worker_type;        // the worker type the run used ("" when unknown)
  int trainer_hosts = 1;
  double global_batch = 0.0;          // samples per step
  double ceiling = 0.0;               // samples/s
  double local = 0.0;                 // samples/s of the trainer hosts' own preprocessing, as run
  int local_threads = 0;              // per trainer host
  // The summary says how many local threads the run had (a Feed's local_threads, the
  // trainer's --local-workers): 0 then means the trainer hosts made no samples, and a plan
  // cannot count their spare cores (the run had no way to use them).
  bool local_threads_known = false;
  double local_per_thread = 0.0;      // samples per CPU-second there; 0 when no local thread ran
  bool local_made_only = false;       // the run said what its hosts made, not their threads and rate
  int ranks = 1;                      // the run's world size
  double bytes_per_sample = 0.0;      // what a sample carried; 0 when unknown
  double checkpoint_seconds = 0.0;    // writing one checkpoint, measured; 0 when none was written
  double startup_seconds = 0.0;       // process start to the first step; 0 when unknown
  double images_per_cpu_second = 0.0; // the per-thread rate the worker estimate scales
  bool rate_from_workers = false;     // false: measured on the trainer host (no workers ran)
  int rate_threads = 0;               // threads the rate was measured over
  int run_workers = 0;                // worker instances in the run
  double run_samples_per_sec = 0.0;   // the run's measured whole-job rate (0 when unknown)
  std::string cpu_model;              // the trainer host's CPU ("" when unknown)
  std::string rate_hosts;             // where the rate was measured, e.g. "algo-2, algo-3"
  bool simulated = false;             // `simulate`: every "host" ran on this machine's CPU (cpu_model)
  // The cross-check of the CPU-time rate against the wall clock: what the workers made
  // (samples/s, summed) against what their threads' CPU time says they can
  // (threads x images_per_cpu_second, summed), and the share of the run spent waiting.
  double workers_made = 0.0;
  double workers_capacity = 0.0;
  double data_wait_fraction = 0.0;
};

// Reads and checks the summary. Throws ConfigError naming the missing or bad field and
// the fix (re-run with a newer tandem, or the option that supplies it).
RunMeasurements read_measurements(const nlohmann::json& summary, const PlanOptions& options);

}  // namespace tandem::plan
