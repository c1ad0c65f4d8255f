#include "tandem/report/scaling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem::report {

double worker_capacity(const SourceStats& s) {
  if (s.threads <= 0 || s.compute_seconds <= 0 || s.samples == 0) return 0;
  return static_cast<double>(s.samples) / s.compute_seconds * s.threads;
}

std::optional<int> workers_wanted(const ScalingInputs& in) {
  std::vector<double> known;
  std::copy_if(in.capacities.begin(), in.capacities.end(), std::back_inserter(known), [](double c) { return c > 0; });
  if (known.empty() || in.ceiling <= 0) return std::nullopt;
  const double mean = std::accumulate(known.begin(), known.end(), 0.0) / static_cast<double>(known.size());
  const double needed = std::max(in.ceiling * (1 - std::clamp(in.target_wait, 0.0, 1.0)) - in.local, 0.0);
  return static_cast<int>(std::ceil(needed / mean - 1e-9));
}

}  // namespace tandem::report
