// Internal to simulate (simulate.cc): `--every-host` and `--job`, where every simulated
// host runs the user's entry point as SageMaker's training toolkit runs it
// (sagemaker_job.h): its processes, one per host, or one per rank on the hosts of a
// torch_distributed group.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/launch/process.h"
#include "tandem/launch/sagemaker_job.h"
#include "tandem/launch/settings.h"

namespace tandem::launch {

struct ToolkitRun {
  SageMakerJob job;
  std::vector<SimHost> hosts;
  std::vector<ProcessSpec> specs;
  std::vector<size_t> owner;  // specs[i] runs on hosts[owner[i]]
};

// The job (--job FILE, else the flags' two groups with tandem's settings `given` as
// tandem- hyperparameters), its hosts' roots under `run` written, and their processes.
// Throws ConfigError for a job the SDK or the toolkit would refuse or break on (a
// hyperparameter the toolkit's unquoted shell line would split), naming it and the fix.
ToolkitRun toolkit_run(const Settings& settings, const nlohmann::json& given, const std::string& run);

// Each host's status from its processes': the first of its ranks that failed, else its first.
std::vector<ExitStatus> host_statuses(const ToolkitRun& t, const std::vector<ExitStatus>& statuses);

}  // namespace tandem::launch
