// Internal to tandem plan: the plan's "spot" section (docs/plan.md, "Spot").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/plan/model.h"
#include "tandem/plan/plan_inputs.h"
#include "tandem/plan/prices.h"

namespace tandem::plan {

struct SpotInputs {
  const PriceTable& prices;
  const InstanceType& trainer;
  const InstanceType& worker;
  int hosts = 1;                    // trainer hosts
  double checkpoint_seconds = 0;    // C: the run's, else assumed
  bool checkpoint_measured = false;
  double restart_seconds = 0;       // R: the table's provisioning + the run's start-up (else assumed)
  bool startup_measured = false;
};

SpotInputs spot_inputs(const RunMeasurements& m, const PriceTable& prices, const InstanceType& trainer,
                       const InstanceType& worker);

// {"checkpoint_seconds", "checkpoint_measured", "restart_seconds", "startup_measured",
//  "provision_seconds", "trainer_discount", "worker_discount",
//  "whole_job": [{"workers", "interruptions_per_day", "on_demand_usd_per_1000_steps",
//                 "on_demand_step_ms", "spot_usd_per_1000_steps", "spot_step_ms",
//                 "saving_vs_on_demand", "checkpoint_every_seconds", "checkpoint_every_steps"}]
//    (no workers, and the recommended count),
//  "spot_workers_on_demand_trainer": {"workers", "worker_away_share", "usd_per_1000_steps",
//                                     "step_ms", "saving_vs_on_demand"} | null}
nlohmann::json spot_section(const SpotInputs& in, const ModelParams& mp, const std::vector<PlanRow>& rows, int best);

// The caveat: what the spot figures measured and what they assumed.
std::string spot_caveat(const SpotInputs& in);

}  // namespace tandem::plan
