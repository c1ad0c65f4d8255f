#include "plan_types.h"

#include <algorithm>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::plan {
namespace {

bool sagemaker_type(const std::string& name) { return name.rfind("ml.", 0) == 0; }

// The table's entry, or, for a type that is not SageMaker's, a bare one without a price.
InstanceType type_or_bare(const PriceTable& prices, const std::string& name) {
  const auto it = prices.types.find(name);
  if (it != prices.types.end() || sagemaker_type(name)) return find_instance_type(prices, name);
  InstanceType bare;
  bare.name = name;
  return bare;
}

}  // namespace

PlanTypes plan_types(const PriceTable& prices, const RunMeasurements& m) {
  PlanTypes t{type_or_bare(prices, m.trainer_type), type_or_bare(prices, m.worker_type)};
  for (const InstanceType* type : {&t.trainer, &t.worker}) {
    if (type->usd_per_hour <= 0 && std::find(t.unpriced.begin(), t.unpriced.end(), type->name) == t.unpriced.end()) t.unpriced.push_back(type->name);
  }
  t.priced = t.unpriced.empty();
  if (t.worker.vcpus > 0) return t;
  if (sagemaker_type(t.worker.name)) {
    throw ConfigError("worker type " + t.worker.name + " has no vCPU count (its price came from --price): add it to a "
                      "--prices file with \"vcpus\"");
  }
  // Another cluster's node type, not sized in a --prices file: as big as the run's workers were.
  if (!m.rate_from_workers || m.run_workers < 1 || m.rate_threads < m.run_workers) {
    throw ConfigError("worker type " + printable(t.worker.name, 80) + " has no vCPU count, and the run had no data "
                      "workers to take one from: give it in a --prices file, {\"instances\": {\"" +
                      printable(t.worker.name, 80) + "\": {\"vcpus\": 64}}} (usd_per_hour too, to weigh dollars)");
  }
  t.worker.vcpus = (m.rate_threads + m.run_workers / 2) / m.run_workers;
  t.worker_vcpus_measured = true;
  return t;
}

}  // namespace tandem::plan
