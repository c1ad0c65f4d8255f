// `tandem simulate`: a whole heterogeneous cluster on this machine as separate processes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tandem/launch/process.h"
#include "tandem/launch/sagemaker_job.h"
#include "tandem/launch/settings.h"

namespace tandem::launch {

// Creates a run directory with one SageMaker root per simulated host (resourceconfig.json,
// hyperparameters.json), maps every host name to 127.0.0.1 with its own port
// (TANDEM_HOST_MAP), starts `tandem_exe launch --sagemaker-root ROOT` per host (under
// --every-host or --job: the user's entry point as SageMaker's toolkit runs it,
// simulate_toolkit.h), waits, prints the trainer's summary and returns the exit code: 0
// only if every host exited 0.
// `hyperparameters` (flat object of setting name -> value) is written, as SageMaker does
// (every value a string), into every host's hyperparameters.json.
int run_simulate(const Settings& settings, const nlohmann::json& hyperparameters,
                 const std::string& tandem_exe);

// ---- The pieces of run_simulate, exposed for tests ----------------------------------------

inline constexpr const char* kTrainGroup = "train_group";
inline constexpr const char* kDataGroup = "data_group";

// The hosts, in algo-N order. Numbering interleaves the groups, data group first
// (algo-1 data, algo-2 train, algo-3 data, ...), so nothing can rely on a name's number
// to tell its role. Throws ConfigError naming the flag on a bad count.
std::vector<SimHost> plan_hosts(const SimulateOptions& opts);

// hosts[current]'s resourceconfig.json, byte for byte in SageMaker's layout (key order
// included, hence ordered_json; network interface "lo"); the groups in the order their
// first hosts come.
nlohmann::ordered_json resource_config(const std::vector<SimHost>& hosts, std::size_t current);

// SageMaker's hyperparameters.json: every value a string. Strings stay as they are,
// anything else becomes its JSON text (64 -> "64", true -> "true", [1,2] -> "[1,2]").
// Throws ConfigError unless `hyperparameters` is an object (or null: no hyperparameters).
nlohmann::json sagemaker_hyperparameters(const nlohmann::json& hyperparameters);

// "algo-1=127.0.0.1:PORT,algo-2=127.0.0.1:PORT,...": TANDEM_HOST_MAP for every child.
std::string host_map(const std::vector<SimHost>& hosts, const std::vector<int>& ports);

// `n` distinct loopback ports that were free a moment ago (bound to 127.0.0.1:0 together,
// then released). Throws std::runtime_error if the sockets cannot be made.
std::vector<int> free_loopback_ports(std::size_t n);

// The cores for host `index`: [index*per_host, index*per_host + per_host) modulo `ncpus`,
// sorted and without duplicates. Empty when per_host <= 0 (no pinning).
std::vector<int> host_cpus(int index, int per_host, unsigned ncpus);

// The warning for --cpus-per-host `per_host` x `hosts` hosts on a machine of `ncpus`
// cores when that is more cores than there are (hosts then share cores, and the rates a
// simulation measures are not a real cluster's), else "".
std::string oversubscription(int per_host, std::size_t hosts, unsigned ncpus);

// Creates <root>/input/config/{resourceconfig,hyperparameters}.json and the output, model
// and checkpoints directories for hosts[index]; clears a previous run's summary and
// failure files so they cannot be mistaken for this run's. `hyperparameters` is already
// stringified. Throws std::runtime_error naming the path it could not write.
void write_host_root(const std::string& root, const std::vector<SimHost>& hosts,
                     std::size_t index, const nlohmann::json& hyperparameters);

// The end-of-run table: one line per host with its role and how it ended.
std::string status_table(const std::vector<SimHost>& hosts,
                         const std::vector<ExitStatus>& statuses);

}  // namespace tandem::launch
