// `tandem bench pipeline|transport|feed`: measurements, never assertions. Each returns
// one JSON object; the CLI prints it, or a human-readable form of it.
#pragma once

#include <nlohmann/json.hpp>

#include "tandem/data/core/options.h"
#include "tandem/training/options.h"


namespace tandem::bench {

struct BenchOptions {
  DataOptions data;          // --data defaults to blur-benchmark here
  int threads = 0;           // preprocessing threads; 0 = all cores
  int batch_size = 32;
  double seconds = 10;       // measured time, after a short warm-up
  int ranks = 1;             // transport: ranks pulling at once, each its own feed
  bool via_relay = false;    // transport: the ranks' streams share one through a relay
};

// Augmentation throughput on this host: the worker's pool and batch maker, no network.
nlohmann::json bench_pipeline(const BenchOptions& opts);

// Pre-made batches (no augmentation) from a worker to a trainer over loopback gRPC: to
// `ranks` feeds at once, straight or through a stream relay (--share-streams). Reports
// bytes per second and per CPU-second of the whole process (worker, relay and ranks).
nlohmann::json bench_transport(const BenchOptions& opts, const std::string& tandem_exe);

// Two data workers of different speed (one pinned to twice the cores of the other):
// each alone, then both feeding one trainer. Reports shares and total vs the solo sum.
nlohmann::json bench_feed(const BenchOptions& opts, const std::string& tandem_exe);

struct TrainBenchOptions {
  TrainerOptions trainer;    // model, batch size, amp, channels-last, optimizer, ...
  DataOptions data;          // --data defaults to premade here (no augmentation cost)
  int64_t steps = 20;        // measured steps of each run
  int64_t warmup_steps = 5;  // before each run
  int threads = 0;           // preprocessing threads feeding the fed run; 0 = spare cores (GPU) or 1 (CPU)
};

// The training loop alone on a batch already on the device (the ceiling), then the same
// loop fed uint8 host batches through the full path (scheduler, pinned buffers, copy and
// conversion on a side stream): images/s of both, their ratio, and per-step times.
nlohmann::json bench_train(const TrainBenchOptions& opts);

}  // namespace tandem::bench
