// The run's summary: what the trainer writes at the end and `simulate` prints.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/common/settings.h"
#include "tandem/data/sources/dataset.h"
#include "tandem/feed/scheduler.h"
#include "tandem/report/run_records.h"

namespace tandem::report {

// steps, samples, samples_per_sec, data_wait_fraction, first_loss, final_loss,
// wall_seconds, and per source {address, batches, samples, images_per_sec, share}.
nlohmann::json make_summary(const TrainReport& train, const std::vector<feed::SourceStats>& sources);

// "settings": what made the samples (data, the dataset it became, its size, image size,
// classes, seed, the pipeline as run, wire dtype) and what trained on them (optimizer,
// learning rate and schedule, momentum, weight decay, clipping, mixed precision, fused
// kernels), for the report and for a person comparing runs.
nlohmann::json run_settings(const Settings& settings, const data::DatasetInfo& dataset);

// Records why the job failed in <root>/output/failure, where SageMaker looks for it.
// Skipped when the root does not exist (not on SageMaker). Never throws: failing to report a failure must not hide the original error.
void write_failure(const std::string& sagemaker_root, const std::string& reason);

}  // namespace tandem::report
