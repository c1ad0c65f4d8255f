// Where a run keeps what it writes (checkpoints, the model, the summary and metrics,
// output/failure): the trainer role's, and a tandem.Feed-fed script's (rank 0).
#pragma once

#include <cstdint>
#include <string>

namespace tandem::report {

// The folder under which a trainer writes, laid out as a SageMaker root (checkpoints/,
// model/, output/data/summary.json, output/failure):
// - `sagemaker_root` (--sagemaker-root) when it exists: SageMaker, or a root `simulate`
//   made;
// - outside SageMaker (no such directory), rank 0 keeps its files in the working
//   directory instead, in ./tandem-output/<job> when the job has a name (`job`: --job-name,
//   TRAINING_JOB_NAME, SLURM_JOB_ID: a restart of the job resumes there), else in a
//   fresh ./tandem-output/run-YYYYMMDD-HHMMSS. It is created here and its absolute path
//   logged. Other ranks write nothing there: "" for them, and "" (with a warning) when
//   the folder cannot be made.
std::string output_root(const std::string& sagemaker_root, const std::string& job, int rank);

// The room an output folder `root` keeps for its last records (common/files.h
// hold_reserve): output/.tandem-reserve, 1 MiB, held by the trainer from its start and
// released just before it writes the summary or output/failure (write_failure).
std::string records_reserve(const std::string& root);
constexpr uint64_t kRecordsReserveBytes = 1 << 20;

// The folder's name for a job: `job` with every character outside [A-Za-z0-9._-]
// replaced by '-', or "" when nothing usable is left ("", ".", "..").
std::string output_folder_name(const std::string& job);

}  // namespace tandem::report
