// The run's summary: what the trainer writes at the end and `simulate` prints.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/plan/plan_inputs.h"
#include "tandem/report/run_records.h"

namespace tandem::report {

// steps, samples, samples_per_sec, data_wait_fraction, first_loss, final_loss,
// wall_seconds, and per source {address, batches, samples, images_per_sec, share}.
nlohmann::json make_summary(const TrainReport& train, const std::vector<SourceStats>& sources);

// "throughput": global and per-rank samples/s over training time, and the ceiling: the
// global rate of the loop while it was not waiting for data (a GPU's idle time excluded).
nlohmann::json throughput(const TrainReport& train);

// What rank 0 knows of a data worker (from its Info answer and the cluster description).
struct WorkerFacts {
  std::string address;
  std::string host;           // as the worker names itself
  std::string instance_type;  // empty when unknown
  int threads = 0;            // 0 when it did not answer
};

// The facts of this run that `tandem plan` needs (the format is plan's: plan_inputs.h):
// this host's cores and CPU model, and the local threads' and each worker's images per
// CPU-second. `sources` are rank 0's; the local threads are the source named "local";
// `local_threads` is per trainer host (every rank's on that host). `simulated` is left
// for the caller.
plan::PlanInputs measure_plan_inputs(const TrainReport& train, const std::vector<SourceStats>& sources,
                                     const std::vector<WorkerFacts>& workers, const std::string& trainer_instance_type,
                                     int trainer_hosts, int local_threads);

// Adds one line for this run (when it ended, its start step and steps, how it ended) to
// runs.jsonl beside `summary_path`: the report of a job run several times (requeued,
// resubmitted under its name) shows every run.
void append_run(const std::string& summary_path, const nlohmann::json& summary);

// Writes `summary` to `path` (atomically), adds it to runs.jsonl (append_run) and writes
// report.html beside it. A report is a
// convenience: a failure to write it is a warning naming `tandem report`, never fatal.
void write_summary_and_report(const std::string& path, const nlohmann::json& summary);

// Records why `host` ("" = this machine's name) failed: in <root>/output/failure.<host>,
// always, and in <root>/output/failure, where SageMaker looks, only when this run has
// none yet (absent, or older than this process): the first cause stays, a consequence
// written after it (a worker whose trainer is gone, a host stopped because another
// failed) goes to its own file. Skipped when the root does not exist (not on SageMaker).
// `replace_first`: this caller took output/failure earlier and now writes its cause in
// full. Returns whether output/failure is this call's. Never throws: failing to report a
// failure must not hide the original error.
bool write_failure(const std::string& sagemaker_root, const std::string& host, const std::string& reason,
                   bool replace_first = false);

}  // namespace tandem::report
