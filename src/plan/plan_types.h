// Internal to tandem plan: the instance types a plan prices, or counts. SageMaker's types
// ("ml.*") must be in the price table; another cluster's node types (a Slurm partition,
// a Kubernetes node pool, a name given with --trainer-type) may lack a price, and then
// the plan counts nodes instead of dollars (docs/plan.md, "Another cluster's node types").
#pragma once

#include <string>
#include <vector>

#include "tandem/plan/plan_inputs.h"
#include "tandem/plan/prices.h"

namespace tandem::plan {

struct PlanTypes {
  InstanceType trainer;
  InstanceType worker;
  bool priced = true;                  // both types have a price: the plan weighs dollars
  std::vector<std::string> unpriced;   // the types without one
  bool worker_vcpus_measured = false;  // the worker's vCPUs are the run's workers' threads
};

// The trainer and worker types of `m` from `prices`. Throws ConfigError for a SageMaker
// type the table lacks (with the nearest names), a priced worker type without vCPUs, and
// an unpriced one whose vCPUs neither the table nor the run's workers give.
PlanTypes plan_types(const PriceTable& prices, const RunMeasurements& m);

}  // namespace tandem::plan
