// `tandem plan` as a library: a run's summary and a price table in, the plan out (how many
// data-worker instances to add to the trainer hosts, and what each choice costs), as JSON
// for tools and the HTML report, or as text for people. Torch-free (tandem_core).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tandem/plan/plan_inputs.h"
#include "tandem/plan/prices.h"

namespace tandem::plan {

// The plan for the run in `summary` (its summary.json), priced from `prices`:
//   {"trainer": {...}, "worker": {...}, "measurement": {...}, "prices": {...},
//    "ceiling_samples_per_sec", "local_samples_per_sec", "global_batch",
//    "rows": [{"workers", "samples_per_sec", "step_ms", "usd_per_hour",
//              "usd_per_1000_steps", "usd_per_million_samples", "saving_vs_none",
//              "at_ceiling"}, ...],          (costs and saving are null where nothing feeds the loop)
//    "workers_to_ceiling": N | null, "recommended": row, "fastest_within": row + "within_pct",
//    "run": {"workers", "measured_samples_per_sec", "predicted_samples_per_sec"} (when comparable),
//    "explanation": "one paragraph", "caveats": ["..."]}
// Throws ConfigError naming the problem and the fix: a missing summary field, a rate of
// 0, an instance type the table does not know (or a worker type without vCPUs).
nlohmann::json make_plan(const nlohmann::json& summary, const PriceTable& prices, const PlanOptions& options);

// The plan as text: the inputs, the table, the recommendation, the explanation and the
// caveats. REQUIRES: `plan` came from make_plan.
std::string format_plan_text(const nlohmann::json& plan);

// `n` with thousands separated by commas and `decimals` digits after the point
// ("12,345.6"); shared with the HTML report.
std::string group_thousands(double n, int decimals);

}  // namespace tandem::plan
