// Keyword arguments of tandem.Feed -> tandem's Settings, through the command line's own
// option registration (src/cli/options.cc): the same names (flag names without "--",
// '_' or '-'), defaults, validators and messages as `tandem trainer`.
#pragma once

#include <string>
#include <vector>

#include "tandem/launch/settings.h"

namespace tandem::python {

// One keyword argument as text; a list gives one value per element.
struct Setting {
  std::string key;
  std::vector<std::string> values;
};

// Starts from the command line's defaults (and its environment: TANDEM_SAGEMAKER_ROOT),
// applies `given` in order, then resolves the token and job as every tandem command does
// (token_file, else token, else env TANDEM_TOKEN, else the tandem-token channel; an
// empty token is refused; job_name, else TRAINING_JOB_NAME or
// SLURM_JOB_ID). Accepts the data and security settings, sagemaker_root, and of the
// trainer's the feed's own: batch_size, steps, inflight, prefetch, connect_timeout,
// batch_timeout. Throws ConfigError naming the key and the fix for anything else or a
// bad value.
Settings feed_settings(const std::vector<Setting>& given);

// The names feed_settings() accepts, with '_' (Python's spelling), sorted.
std::vector<std::string> feed_setting_names();

}  // namespace tandem::python
