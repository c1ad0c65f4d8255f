// The facts of a run that `tandem plan` needs, added to the summary by rank 0: how fast
// the training loop consumes when it is not waiting (the ceiling), and how many images
// each source makes per CPU-second, on which cores and instance types.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/feed/scheduler.h"
#include "tandem/report/run_records.h"

namespace tandem::report {

// What rank 0 knows of a data worker (from its Info answer and the cluster description).
struct WorkerFacts {
  std::string address;
  std::string host;           // as the worker names itself
  std::string instance_type;  // empty when unknown
  int threads = 0;            // 0 when it did not answer
};

// "throughput": global and per-rank samples/s over training time, and the ceiling: the
// global rate of the loop while it was not waiting for data (a GPU's idle time excluded).
nlohmann::json throughput(const TrainReport& train);

// "plan_inputs", per docs/plan.md: instance types, hosts, ranks, cores, the CPU model,
// the local threads' and each worker's images per CPU-second. `sources` are rank 0's;
// the local threads are the source named "local"; `local_threads` is per trainer host
// (every rank's on that host).
nlohmann::json plan_inputs(const TrainReport& train, const std::vector<feed::SourceStats>& sources,
                           const std::vector<WorkerFacts>& workers, const std::string& trainer_instance_type,
                           int trainer_hosts, int local_threads);

// "model name" of /proc/cpuinfo, or "unknown".
std::string cpu_model();

}  // namespace tandem::report
