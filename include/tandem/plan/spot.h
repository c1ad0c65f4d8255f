// Spot: what a job costs and takes when its instances can be interrupted, and how often
// to checkpoint. Pure arithmetic, no I/O. A SageMaker job (managed spot) restarts whole
// when any instance is interrupted, from its last checkpoint:
//
//   checkpoint every tau = sqrt(2 C / lambda)                   (Young; Daly's first order)
//   wall time per second of training = (1 + C / tau) (1 + lambda (R + (tau + C) / 2))
//
// with C the cost of one checkpoint, R the restart (provisioning and start-up to the
// first step) and lambda the job's interruptions per second (the sum over its spot
// instances). Where groups are interrupted apart (Kubernetes, Slurm), stateless data
// workers on spot cost only their absence: each is away lambda_w R_w of the time.
#pragma once

namespace tandem::plan {

struct SpotJob {
  double interruptions_per_hour = 0;  // lambda, the whole job's
  double checkpoint_seconds = 0;      // C
  double restart_seconds = 0;         // R
};

// Young's interval, seconds of training between checkpoints; infinite when lambda is 0.
double checkpoint_interval_seconds(const SpotJob& job);

// Wall seconds per second of training with checkpoints every `interval_s` (above).
double spot_time_factor(const SpotJob& job, double interval_s);

// The share of the time one worker is away: lambda_w R_w / (1 + lambda_w R_w).
double absent_share(double interruptions_per_hour, double replace_seconds);

}  // namespace tandem::plan
