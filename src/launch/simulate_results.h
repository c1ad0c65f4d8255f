// Internal to simulate (simulate.cc): what a finished simulated run shows and keeps.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tandem/launch/process.h"
#include "tandem/launch/simulate.h"

namespace tandem::launch {

// A file's text, "" when it is missing (a host that wrote no failure, no summary).
std::string text_of(const std::filesystem::path& path);

// Prints the first trainer's summary as a table and copies the JSON to `copy_to` when
// that is set.
void print_summary(const std::string& run, const std::vector<SimHost>& hosts, const std::string& copy_to);

// A run directory simulate made itself keeps, after a good run, what a person reads and
// the trained model: checkpoints go, and so do the empty model folders of the worker hosts.
void tidy_run_dir(const std::string& run, const std::vector<SimHost>& hosts);

// The first trainer's model_file, when its summary names one that exists; else "".
std::string trained_model(const std::string& run, const std::vector<SimHost>& hosts);

// A worker host that did not fail: it exited 0, or the stop of the cluster ended it
// (SIGTERM, or 75: stopped before its trainer released it).
bool worker_did_not_fail(const ExitStatus& s);

// One line when every worker host failed, grouping the hosts that failed for the same
// reason (their output/failure, else how they ended): "" otherwise.
std::string workers_failed(const std::string& run, const std::vector<SimHost>& hosts,
                           const std::vector<ExitStatus>& statuses);

// Each failed host's output/failure, printed.
void print_failures(const std::string& run, const std::vector<SimHost>& hosts);

}  // namespace tandem::launch
