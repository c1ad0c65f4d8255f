// The price-performance model behind `tandem plan`: how fast and how costly a job is
// with N data-worker instances added to its trainer hosts. Pure arithmetic, no I/O.
//
//   throughput(N) = min(ceiling, local + min(N * min(per_worker, worker_network),
//                                            trainer_network))      samples/s, whole job
//   cost per sample(N) = (trainer $/h * trainer hosts + N * worker $/h) / 3600 / throughput(N)
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace tandem::plan {

// The model's inputs, all for the whole job. REQUIRES: every value finite and >= 0;
// ceiling, global_batch and trainer_usd_per_hour > 0.
struct ModelParams {
  double ceiling = 0.0;              // samples/s the training loop takes when never waiting for data
  double local = 0.0;                // samples/s the trainer hosts' own preprocessing makes
  double per_worker = 0.0;           // samples/s one worker instance adds
  double global_batch = 0.0;         // samples per step, all ranks together
  double trainer_usd_per_hour = 0.0; // all trainer hosts together
  double worker_usd_per_hour = 0.0;  // one worker instance
  // Samples/s the network carries: out of one worker instance (its NIC), and into the
  // trainer hosts from all workers together (theirs). Infinite when not known.
  double worker_network = std::numeric_limits<double>::infinity();
  double trainer_network = std::numeric_limits<double>::infinity();
};

// What holds a row's throughput: the training loop ("ceiling"), the workers' cores
// ("cores"), a worker's NIC ("worker network") or the trainer hosts' NIC ("trainer
// network"); "cores" too for N = 0 (the trainer hosts' own).
std::string row_limit(const ModelParams& p, int workers);

// One line of the plan's table.
struct PlanRow {
  int workers = 0;
  double samples_per_sec = 0.0;  // 0 when nothing feeds the loop (no local threads, N = 0)
  double step_seconds = 0.0;     // global_batch / samples_per_sec; 0 when samples_per_sec is 0
  double usd_per_hour = 0.0;
  double usd_per_1000_steps = 0.0;      // 0 when samples_per_sec is 0 (undefined)
  double usd_per_million_samples = 0.0; // 0 when samples_per_sec is 0 (undefined)
  bool feasible = false;         // samples_per_sec > 0
  bool at_ceiling = false;       // the data path keeps up: the loop is the bottleneck
  std::string limit;             // row_limit()
};

// The predicted whole-job samples/s with `workers` worker instances (a fraction: workers
// away part of the time).
double predicted_throughput(const ModelParams& p, double workers);

// The row for `workers` worker instances.
PlanRow plan_row(const ModelParams& p, int workers);

// The smallest N whose throughput reaches the ceiling, or -1 when none does (per_worker
// is 0, or the trainer hosts' network caps the workers short of it).
int workers_to_ceiling(const ModelParams& p);

// Rows for N = 0 .. (the first N at the ceiling) + 1, at most max_workers + 1 rows.
std::vector<PlanRow> plan_table(const ModelParams& p, int max_workers);

// Index of the row with the lowest cost per sample (the first on a tie), or -1 when no
// row is feasible.
int cheapest_row(const std::vector<PlanRow>& rows);

// Index of the fastest row whose cost per sample is at most (1 + within_pct / 100) times
// the cheapest's (the first, i.e. fewest workers, on a tie), or -1 when no row is feasible.
int fastest_row_within(const std::vector<PlanRow>& rows, double within_pct);

// Where an elastic data pool may run (an autoscaler on tandem_workers_wanted, which asks
// for the workers that bring the loop to its ceiling): it starts at the cheapest row
// and moves between the fewest and the fastest row whose cost per sample is within
// `within_pct` of the cheapest's; at least one worker when the cheapest has any. The
// rows' worker counts; all -1 when no row is feasible.
struct ScalingRange {
  int start = -1;
  int min = -1;
  int max = -1;
};
ScalingRange scaling_range(const std::vector<PlanRow>& rows, double within_pct);

// Without prices (another cluster's node types): the fastest row (the first, i.e. fewest
// workers, on a tie), and the fewest workers whose throughput is within `within_pct` of
// it (samples_per_sec * (1 + within_pct / 100) >= the fastest's); -1 when no row is
// feasible. The elastic range then runs from the second to the first.
int fastest_row(const std::vector<PlanRow>& rows);
int fewest_near_fastest(const std::vector<PlanRow>& rows, double within_pct);
ScalingRange node_range(const std::vector<PlanRow>& rows, double within_pct);

// 1 - cost(row) / cost(base): the fraction saved per sample against `base`; 0 when either
// is not feasible.
double saving(const PlanRow& row, const PlanRow& base);

}  // namespace tandem::plan
