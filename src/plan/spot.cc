#include "tandem/plan/spot.h"

#include <cmath>
#include <limits>

namespace tandem::plan {

double checkpoint_interval_seconds(const SpotJob& job) {
  const double per_second = job.interruptions_per_hour / 3600.0;
  if (per_second <= 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(2.0 * job.checkpoint_seconds / per_second);
}

double spot_time_factor(const SpotJob& job, double interval_s) {
  const double per_second = job.interruptions_per_hour / 3600.0;
  const double writing = std::isfinite(interval_s) && interval_s > 0 ? job.checkpoint_seconds / interval_s : 0.0;
  const double lost = std::isfinite(interval_s) ? (interval_s + job.checkpoint_seconds) / 2.0 : 0.0;
  return (1.0 + writing) * (1.0 + per_second * (job.restart_seconds + lost));
}

double absent_share(double interruptions_per_hour, double replace_seconds) {
  const double away = interruptions_per_hour / 3600.0 * replace_seconds;
  return away / (1.0 + away);
}

}  // namespace tandem::plan
