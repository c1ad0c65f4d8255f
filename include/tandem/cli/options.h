// The command line: every setting is a flag, and the same names (without "--") work as
// keys of a --config JSON file and of SageMaker's hyperparameters.json.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json_fwd.hpp>

#include "tandem/cluster/cluster.h"
#include "tandem/launch/settings.h"

namespace tandem::cli {

// Option groups; `simulate` forwards the settings of the last three to every host.
inline constexpr const char* kClusterGroup = "Cluster";
inline constexpr const char* kDataGroup = "Data";
inline constexpr const char* kWorkerGroup = "Data worker";
inline constexpr const char* kTrainerGroup = "Training";
inline constexpr const char* kSecurityGroup = "Security";
inline constexpr const char* kLaunchGroup = "Launch";

// Number checks for flags and settings files: finite, in range, bounds printed plainly.
CLI::Validator positive();      // more than 0, at most 1e9
CLI::Validator non_negative();  // 0 to 1e9
CLI::Validator in_range(double lo, double hi);

void add_cluster_options(CLI::App& app, ClusterOptions& o);
void add_data_options(CLI::App& app, DataOptions& o);
void add_worker_options(CLI::App& app, WorkerOptions& o);
void add_trainer_options(CLI::App& app, TrainerOptions& o);
// --workers and --worker-service: data workers named directly (trainer, launch, inspect).
void add_worker_list_options(CLI::App& app, TrainerOptions& o);
void add_security_options(CLI::App& app, SecurityOptions& o);
void add_simulate_options(CLI::App& app, SimulateOptions& o);
// A user's command as the ranks (launch, train, simulate): `-- COMMAND ARGS...` (also
// `command` in a settings file), --script, --script-args, --stop-grace.
void add_launch_options(CLI::App& app, LaunchOptions& o);
// Every setting a host's role may use (cluster, security, data, worker, trainer, and the
// named workers): `launch`, `train` and `inspect`, which checks a host's whole setup.
void add_host_options(CLI::App& app, Settings& s);

// A pool's job's data options (`tandem worker --pool-jobs`, a job's "settings": a JSON
// object of data settings as a settings file names them): `base` with them applied by the
// flags' own parser. ConfigError naming a setting that is not a data setting or a value
// that does not parse.
DataOptions pool_job_data(const DataOptions& base, const std::string& settings);

// Fills options of `cmd` that were not given as flags from opts.config_file, then from
// <sagemaker_root>/input/config/hyperparameters.json (which wins over the config file).
// Keys are flag names without "--" ('_' and '-' are interchangeable). Throws
// ConfigError for a file that is not a JSON object, an unknown key, a bad value, or
// settings that exclude each other (steps and epochs). A `command` list read from a file
// goes to `command` word for word (CLI11 would split "[a,b]").
void apply_setting_files(CLI::App& cmd, const ClusterOptions& opts, std::vector<std::string>* command = nullptr);

// The last step of filling `s`, after flags and files: what only the environment says
// (TANDEM_TOKEN when neither --token nor --token-file is given, else the token file in
// the SageMaker channel tandem-token when there is one; the job name from
// TRAINING_JOB_NAME or SLURM_JOB_ID, and for a command that may run as a training rank,
// `is_rank`, torchrun's variables into s.launcher), and the settings derived from
// others. The one place settings are read from the environment, besides the flags that
// name a variable (--sagemaker-root, --host-map). Throws ConfigError naming a bad
// variable (an empty TANDEM_TOKEN) or token file. A command that trains no rank ignores
// torchrun's variables, so a stray RANK or a Kubernetes MASTER_PORT=tcp://... cannot
// stop a data worker.
void finish_settings(Settings& s, bool is_rank = false, const cluster::EnvLookup& env = cluster::process_env);

// Settings whose one value may be a JSON list of its parts (--pipeline): a list given for
// them in a file, a hyperparameter or tandem.Feed is that list's JSON text, not an error.
bool takes_json_list(const std::string& name);

// The tandem- (or tandem_) keys of <sagemaker_root>/input/config/hyperparameters.json,
// the prefix taken off ("tandem-image-size" -> "image-size"), each with the values a flag
// would take (decoded from either SDK's encoding); none when the file is not there. For
// tandem.Feed, which takes the script's tandem settings from there as serve() does.
// Throws ConfigError for a file that is not a JSON object.
std::vector<std::pair<std::string, std::vector<std::string>>> script_hyperparameters(const std::string& sagemaker_root);

// The Data/Data worker/Training settings that `cmd` received from flags or files, as
// a flat JSON object {name: value}.
nlohmann::json given_settings(const CLI::App& cmd);

}  // namespace tandem::cli
