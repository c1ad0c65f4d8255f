// Internal to tandem plan: the plan's "sweep" section (--sweep-jobs N; docs/plan.md,
// "A sweep on one pool").
#pragma once

#include <nlohmann/json.hpp>

#include "tandem/plan/model.h"

namespace tandem::plan {

// N jobs like the run (the same data, pipeline, seed and batch geometry: identical
// requests), each at the recommended row's rate `row`, on N separate sets of `row`'s
// workers against one pool that makes each sample once and sends it to each job: the
// pool's workers are as many as its cores need to make one job's share of the rate (the
// rate less what the trainer hosts make) or as its NICs need to send it N times, whichever
// is more. {"jobs", "separate_workers", "shared_workers", "limit" ("cores" or "worker
// network"), "samples_made_per_sec", "samples_sent_per_sec", and with prices the
// workers' "separate_usd_per_hour", "shared_usd_per_hour", "saving"}.
nlohmann::json sweep_section(const ModelParams& mp, const nlohmann::json& row, int jobs, bool priced);

// Its lines in the text plan; "" without the section.
std::string sweep_text(const nlohmann::json& p);

}  // namespace tandem::plan
