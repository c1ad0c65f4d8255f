// A run that failed is never missing from its folder: its summary.json says why and with
// which code, runs.jsonl lists it and report.html shows it. For a user's script under
// `tandem launch` the launcher records it: the script's tandem.Feed may have written its
// summary already (its block ended with the error), or not (the script failed before).
#pragma once

#include <string>

namespace tandem::report {

// Adds `failure` and `code` to the summary at `path` when one was written since
// `since` (seconds since the epoch: this run's), and to its line in runs.jsonl; else
// writes a summary of the failure alone (`program`: what ran). Then writes report.html.
// Never throws: what cannot be written is logged.
void record_failed_run(const std::string& path, const std::string& program, const std::string& failure, int code,
                       double since);

}  // namespace tandem::report
