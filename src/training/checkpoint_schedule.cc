#include "checkpoint_schedule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tandem/plan/spot.h"

namespace tandem::training {

CheckpointSchedule::CheckpointSchedule(const CheckpointOptions& opts, int64_t start_step, int64_t steps)
    : interruptions_per_hour_(opts.interruptions_per_hour),
      first_(start_step + kAutoFirstCheckpoint),
      steps_(steps),
      every_(opts.every < 0 ? -1 : opts.every) {}

bool CheckpointSchedule::due(int64_t done) const {
  if (done >= steps_) return false;  // the final model follows
  if (every_ > 0) return done % every_ == 0;
  return every_ < 0 && done == first_;
}

std::string CheckpointSchedule::measured(int64_t done, double checkpoint_s, double step_s) {
  if (every_ >= 0 || done != first_) return "";
  const plan::SpotJob job{interruptions_per_hour_, checkpoint_s, 0};
  const double interval = plan::checkpoint_interval_seconds(job);
  if (!std::isfinite(interval) || step_s <= 0) {
    every_ = 0;
    return fmt::format("--checkpoint-every auto: a checkpoint took {:.2f} s and no interruptions are expected: "
                       "no more checkpoints until a stop", checkpoint_s);
  }
  every_ = std::max<int64_t>(1, std::llround(interval / step_s));
  return fmt::format("--checkpoint-every auto: a checkpoint took {:.2f} s and the job expects {:.3g} spot "
                     "interruptions an hour, so it checkpoints every sqrt(2 x {:.2f} s / {:.3g} per hour) = {:.0f} s, "
                     "every {} steps of {:.3f} s",
                     checkpoint_s, interruptions_per_hour_, checkpoint_s, interruptions_per_hour_, interval, every_,
                     step_s);
}

}  // namespace tandem::training
