// A run's settings as its summary keeps them ("settings" of summary.json).
#pragma once

#include <nlohmann/json.hpp>

#include "tandem/data/core/dataset_info.h"
#include "tandem/launch/settings.h"

namespace tandem::launch {

// "settings": what made the samples (data, the dataset it became, its size, image size,
// classes, seed, the pipeline as run, wire dtype) and what trained on them (optimizer,
// learning rate and schedule, momentum, weight decay, clipping, mixed precision, fused
// kernels), for the report and for a person comparing runs.
// `script`: a script fed by tandem.Feed trains with its own options, so the keys of what
// trained are null.
nlohmann::json run_settings(const Settings& settings, const data::DatasetInfo& dataset, bool script = false);

}  // namespace tandem::launch
