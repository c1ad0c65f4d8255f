#include "tandem/plan/model.h"

#include <algorithm>
#include <cmath>

namespace tandem::plan {

namespace {

// Relative slack for "reaches the ceiling" and cost ties, so rounding in the inputs does
// not decide the answer.
constexpr double kTolerance = 1e-9;

double effective_per_worker(const ModelParams& p) { return std::min(p.per_worker, p.worker_network); }

double from_workers(const ModelParams& p, double workers) {
  return std::min(workers * effective_per_worker(p), p.trainer_network);
}

}  // namespace

double predicted_throughput(const ModelParams& p, double workers) {
  return std::min(p.ceiling, p.local + from_workers(p, workers));
}

std::string row_limit(const ModelParams& p, int workers) {
  const double rate = predicted_throughput(p, workers);
  if (rate >= p.ceiling * (1 - kTolerance)) return "ceiling";
  if (workers == 0) return "cores";
  if (workers * effective_per_worker(p) > p.trainer_network) return "trainer network";
  return p.worker_network < p.per_worker ? "worker network" : "cores";
}

PlanRow plan_row(const ModelParams& p, int workers) {
  PlanRow r;
  r.workers = workers;
  r.samples_per_sec = predicted_throughput(p, workers);
  r.usd_per_hour = p.trainer_usd_per_hour + workers * p.worker_usd_per_hour;
  r.at_ceiling = r.samples_per_sec >= p.ceiling * (1 - kTolerance);
  r.limit = row_limit(p, workers);
  r.feasible = r.samples_per_sec > 0;
  if (r.feasible) {
    r.step_seconds = p.global_batch / r.samples_per_sec;
    const double usd_per_second = r.usd_per_hour / 3600.0;
    r.usd_per_1000_steps = usd_per_second * r.step_seconds * 1000.0;
    r.usd_per_million_samples = usd_per_second / r.samples_per_sec * 1e6;
  }
  return r;
}

int workers_to_ceiling(const ModelParams& p) {
  if (p.local >= p.ceiling * (1 - kTolerance)) return 0;
  const double per_worker = effective_per_worker(p);
  if (per_worker <= 0 || p.local + p.trainer_network < p.ceiling * (1 - kTolerance)) return -1;
  const double needed = (p.ceiling - p.local) / per_worker;
  int n = static_cast<int>(std::ceil(needed * (1 - kTolerance)));
  while (!plan_row(p, n).at_ceiling) ++n;  // ceil's rounding, at most a step or two
  return n;
}

std::vector<PlanRow> plan_table(const ModelParams& p, int max_workers) {
  const int at_ceiling = workers_to_ceiling(p);
  const int last = at_ceiling < 0 ? max_workers : std::min(at_ceiling + 1, max_workers);
  std::vector<PlanRow> rows;
  for (int n = 0; n <= last; ++n) rows.push_back(plan_row(p, n));
  return rows;
}

int cheapest_row(const std::vector<PlanRow>& rows) {
  int best = -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].feasible) continue;
    if (best < 0 || rows[i].usd_per_million_samples < rows[best].usd_per_million_samples * (1 - kTolerance)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

int fastest_row_within(const std::vector<PlanRow>& rows, double within_pct) {
  const int cheapest = cheapest_row(rows);
  if (cheapest < 0) return -1;
  const double limit = rows[cheapest].usd_per_million_samples * (1 + within_pct / 100.0) * (1 + kTolerance);
  int best = cheapest;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].feasible || rows[i].usd_per_million_samples > limit) continue;
    if (rows[i].samples_per_sec > rows[best].samples_per_sec * (1 + kTolerance)) best = static_cast<int>(i);
  }
  return best;
}

ScalingRange scaling_range(const std::vector<PlanRow>& rows, double within_pct) {
  const int cheapest = cheapest_row(rows);
  if (cheapest < 0) return {};
  ScalingRange r{rows[cheapest].workers, rows[cheapest].workers, rows[fastest_row_within(rows, within_pct)].workers};
  const double limit = rows[cheapest].usd_per_million_samples * (1 + within_pct / 100.0) * (1 + kTolerance);
  for (const PlanRow& row : rows) {
    if (row.feasible && row.usd_per_million_samples <= limit) r.min = std::min(r.min, row.workers);
  }
  if (r.start > 0) r.min = std::max(r.min, 1);
  return r;
}

int fastest_row(const std::vector<PlanRow>& rows) {
  int best = -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].feasible) continue;
    if (best < 0 || rows[i].samples_per_sec > rows[best].samples_per_sec * (1 + kTolerance)) best = static_cast<int>(i);
  }
  return best;
}

int fewest_near_fastest(const std::vector<PlanRow>& rows, double within_pct) {
  const int fastest = fastest_row(rows);
  if (fastest < 0) return -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].feasible &&
        rows[i].samples_per_sec * (1 + within_pct / 100.0) * (1 + kTolerance) >= rows[fastest].samples_per_sec) {
      return static_cast<int>(i);
    }
  }
  return fastest;
}

ScalingRange node_range(const std::vector<PlanRow>& rows, double within_pct) {
  const int fewest = fewest_near_fastest(rows, within_pct);
  if (fewest < 0) return {};
  return {rows[fewest].workers, rows[fewest].workers, rows[fastest_row(rows)].workers};
}

double saving(const PlanRow& row, const PlanRow& base) {
  if (!row.feasible || !base.feasible) return 0.0;
  return 1.0 - row.usd_per_million_samples / base.usd_per_million_samples;
}

}  // namespace tandem::plan
