// `tandem bench pipeline|transport|feed`: measurements, never assertions. Each returns
// one JSON object; the CLI prints it, or a human-readable form of it.
#pragma once

#include <nlohmann/json.hpp>

#include "tandem/common/settings.h"

namespace tandem::bench {

struct BenchOptions {
  DataOptions data;          // --data defaults to blur-benchmark here
  int threads = 0;           // preprocessing threads; 0 = all cores
  int batch_size = 32;
  double seconds = 10;       // measured time, after a short warm-up
};

// Augmentation throughput on this host: the worker's pool and batch maker, no network.
nlohmann::json bench_pipeline(const BenchOptions& opts);

// Pre-made batches (no augmentation) from a worker to a trainer over loopback gRPC.
nlohmann::json bench_transport(const BenchOptions& opts, const std::string& tandem_exe);

// Two data workers of different speed (one pinned to twice the cores of the other):
// each alone, then both feeding one trainer. Reports shares and total vs the solo sum.
nlohmann::json bench_feed(const BenchOptions& opts, const std::string& tandem_exe);

}  // namespace tandem::bench
