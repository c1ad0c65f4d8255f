// Where a training step's time goes (Torch world only), without stalling the GPU: on
// CUDA every boundary is an event on the compute stream and the times are read only when
// asked (at log steps, when the host synchronises anyway); on the CPU they are wall-clock.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "tandem/common/clock.h"
#include "tandem/training/run_types.h"

namespace tandem::training {

// Seconds per phase, summed over the steps since the last drain.
struct StepBreakdown {
  double idle = 0;              // before a step could start: waiting for its batch (GPU idle on CUDA)
  double forward_backward = 0;
  double communication = 0;     // gradient allreduce not hidden behind backward
  double optimizer = 0;         // clipping and the optimizer step
  int64_t steps = 0;
};

class StepClock {
 public:
  enum Phase { kForwardBackward, kCommunication, kOptimizer };

  explicit StepClock(torch::Device device);
  ~StepClock();

  void start_step();    // the batch is in hand (on CUDA: the stream has waited for it)
  void mark(Phase p);   // phase p has just been issued; call in order, kOptimizer last
  StepBreakdown drain();
  // Work outside the steps (evaluation, a checkpoint, logging) happened since the last
  // step: the gap before the next step is not idle time.
  void interrupt();

 private:
  struct Cuda;
  std::unique_ptr<Cuda> cuda_;
  Clock::time_point last_;
  bool started_ = false;
  StepBreakdown sum_;
};


// Adds one interval's breakdown and the feed's (host wait, copy+convert) seconds to
// `total`; returns the interval's data wait: the GPU's idle time on CUDA, the host's wait
// for a batch on the CPU.
double add_times(StepTimes& total, const StepBreakdown& clock, std::pair<double, double> feed, bool cuda);

}  // namespace tandem::training
