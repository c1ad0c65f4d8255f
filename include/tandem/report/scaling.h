// How many data workers a running job wants (tandem_workers_wanted, issue 37), as
// tf.data service's auto-scaler reasons (optimal workers = the consumers' rate over a
// worker's mean rate): the training loop could take `ceiling` samples/s; to keep its data
// wait under `target_wait` the sources must make ceiling x (1 - target_wait); the
// trainer's own threads make `local` of that, and each worker can make its capacity:
// its samples per CPU-second times its threads (what `tandem plan` prices from).
#pragma once

#include <optional>
#include <vector>

#include "tandem/report/run_records.h"

namespace tandem::report {

struct ScalingInputs {
  double ceiling = 0;       // samples/s the loop takes when it never waits
  double local = 0;         // samples/s this host's own threads delivered
  std::vector<double> capacities;  // samples/s each live worker can make
  double target_wait = 0.05;       // the data wait wanted at most, a fraction
};

// The workers wanted; nullopt while no worker's capacity is known yet (none has served).
std::optional<int> workers_wanted(const ScalingInputs& in);

// A worker's capacity from what it reported: samples / compute_seconds x threads; 0 when
// it has not served or its threads are not known.
double worker_capacity(const SourceStats& s);

}  // namespace tandem::report
