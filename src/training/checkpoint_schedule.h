// When the training loop checkpoints: every N steps (--checkpoint-every N), never but on a
// stop or a failure (0), or auto (-1): the first checkpoint, kAutoFirstCheckpoint steps
// into the run, measures what one costs; from then on the loop checkpoints every Young's
// interval, sqrt(2 x cost / the job's interruption rate) seconds of training, in steps of
// the mean step time so far (plan/spot.h, docs/plan.md "Spot"). Torch-free.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/training/trainer_options.h"

namespace tandem::training {

constexpr int64_t kAutoFirstCheckpoint = 20;

class CheckpointSchedule {
 public:
  CheckpointSchedule(const CheckpointOptions& opts, int64_t start_step, int64_t steps);

  // A checkpoint is due once step `done` (1-based) has completed.
  bool due(int64_t done) const;
  // The checkpoint at step `done` took `checkpoint_s` seconds and steps so far took
  // `step_s` each: under auto, the first sets the interval. Returns the line to log
  // ("" when nothing was decided).
  std::string measured(int64_t done, double checkpoint_s, double step_s);
  // Steps between checkpoints: 0 = none but on a stop; -1 = auto, not measured yet.
  int64_t every() const { return every_; }

 private:
  double interruptions_per_hour_;
  int64_t first_;  // auto: the step of the measuring checkpoint
  int64_t steps_;
  int64_t every_;
};

}  // namespace tandem::training
