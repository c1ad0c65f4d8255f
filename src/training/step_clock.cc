#include "step_clock.h"

#if defined(TANDEM_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace tandem::training {
namespace {
constexpr int kInterrupted = -3;  // a boundary after work outside the steps
}  // namespace

// On CUDA: one event per boundary, in order; the gap between the previous step's last
// event and this step's first is time the GPU had nothing to do.
struct StepClock::Cuda {
#if defined(TANDEM_WITH_CUDA)
  c10::DeviceIndex device;
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events;  // pool, reused after each drain
  std::vector<int> phases;   // per recorded event: -1 = step start, else the Phase that ended
  size_t used = 0;
  std::unique_ptr<at::cuda::CUDAEvent> previous_end;  // the last step's final event, carried over
  int previous_phase = -2;

  void record(int phase) {
    if (used == events.size()) events.push_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    events[used]->record(at::cuda::getCurrentCUDAStream(device));
    if (phases.size() <= used) phases.resize(used + 1);
    phases[used++] = phase;
  }
#endif
};

StepClock::StepClock(torch::Device device) {
#if defined(TANDEM_WITH_CUDA)
  if (device.is_cuda()) {
    cuda_ = std::make_unique<Cuda>();
    cuda_->device = device.index();
  }
#else
  (void)device;
#endif
}

StepClock::~StepClock() = default;

void StepClock::start_step() {
  ++sum_.steps;
#if defined(TANDEM_WITH_CUDA)
  if (cuda_) return cuda_->record(-1);
#endif
  const auto now = Clock::now();
  if (started_) sum_.idle += std::chrono::duration<double>(now - last_).count();
  started_ = true;
  last_ = now;
}

void StepClock::mark(Phase p) {
#if defined(TANDEM_WITH_CUDA)
  if (cuda_) return cuda_->record(p);
#endif
  const auto now = Clock::now();
  const double s = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  if (p == kForwardBackward) sum_.forward_backward += s;
  else if (p == kCommunication) sum_.communication += s;
  else sum_.optimizer += s;
}

void StepClock::interrupt() {
#if defined(TANDEM_WITH_CUDA)
  if (cuda_) {
    // Drop the boundary the next step's idle time would be measured from: after the
    // events recorded so far, a fresh start.
    cuda_->record(kInterrupted);
    return;
  }
#endif
  started_ = false;
}

StepBreakdown StepClock::drain() {
#if defined(TANDEM_WITH_CUDA)
  if (cuda_ && cuda_->used > 0) {
    Cuda& c = *cuda_;
    c.events[c.used - 1]->synchronize();
    const at::cuda::CUDAEvent* prev = c.previous_end.get();
    int prev_phase = c.previous_phase;
    for (size_t i = 0; i < c.used; ++i) {
      const at::cuda::CUDAEvent& e = *c.events[i];
      if (prev) {
        const double s = prev->elapsed_time(e) / 1000.0;
        switch (c.phases[i]) {
          case kInterrupted: break;  // time outside the steps
          case -1: sum_.idle += prev_phase == kInterrupted ? 0.0 : s; break;
          case kForwardBackward: sum_.forward_backward += s; break;
          case kCommunication: sum_.communication += s; break;
          default: sum_.optimizer += s; break;
        }
      }
      prev = &e;
      prev_phase = c.phases[i];
    }
    c.previous_phase = prev_phase;
    // Keep the last event as the next interval's start; the rest return to the pool.
    std::swap(c.events[c.used - 1], c.previous_end);
    if (!c.events[c.used - 1]) c.events.erase(c.events.begin() + static_cast<long>(c.used) - 1);
    c.used = 0;
  }
#endif
  const StepBreakdown out = sum_;
  sum_ = {};
  return out;
}

}  // namespace tandem::training

namespace tandem::training {

double add_times(StepTimes& total, const StepBreakdown& clock, std::pair<double, double> feed, bool cuda) {
  const double wait = cuda ? clock.idle : feed.first;
  total.data_wait += wait;
  total.host_to_device += feed.second;
  total.forward_backward += clock.forward_backward;
  total.communication += clock.communication;
  total.optimizer += clock.optimizer;
  return wait;
}

}  // namespace tandem::training
