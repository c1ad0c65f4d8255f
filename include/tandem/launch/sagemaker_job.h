// A SageMaker training job as `tandem simulate --every-host` runs it: the estimator's
// arguments (instance groups, hyperparameters, distribution, channels per group,
// checkpoints) and what SageMaker's training toolkit gives each host of it, read from the
// toolkit's and the SDK's own sources (aws/sagemaker-training-toolkit environment.py,
// mapping.py, process.py, torch_distributed.py; aws/sagemaker-python-sdk estimator.py):
// the SM_* environment, hyperparameters.json in the estimator's encoding, inputdataconfig
// .json, the channels of the host's group, /opt/ml/checkpoints restored from the
// checkpoint store, and the entry point run as `python ENTRY --key value ...` through
// /bin/sh, or under torchrun on the groups of a torch_distributed distribution.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::launch {

struct JobGroup {
  std::string name;           // instance_group_name
  std::string instance_type;  // ml.p4d.24xlarge
  int count = 1;              // instance_count
  int gpus = -1;              // the GPUs simulated per host (SM_NUM_GPUS); -1 = the type's (0 for CPU types)
};

struct JobChannel {
  std::string name;                 // "train": /opt/ml/input/data/train, SM_CHANNEL_TRAIN
  std::string path;                 // the folder standing in for its S3 prefix
  std::string input_mode = "File";  // File, FastFile, Pipe (inputdataconfig.json; the data is a folder either way)
  std::vector<std::string> groups;  // TrainingInput(instance_groups=...); empty = every group
};

// The estimator's arguments (`--job FILE`, docs/sagemaker.md "simulate"):
//   {"estimator": "PyTorch" | "Estimator", "entry_point": "launcher.py", "source_dir": ".",
//    "instance_groups": [{"instance_group_name": "data_group", "instance_type": "ml.c5.18xlarge",
//                         "instance_count": 2}, ...],
//    "distribution": {"torch_distributed": {"enabled": true}, "instance_groups": ["dnn_group"]},
//    "hyperparameters": {...}, "inputs": {"train": {"path": DIR, "instance_groups": [...],
//    "input_mode": "FastFile"}}, "checkpoint_dir": DIR, "job_name": "...", "gpus": {"dnn_group": 2}}
struct SageMakerJob {
  std::string job_name = "tandem-simulated-job";
  bool framework = true;      // the PyTorch estimator (each value json.dumps'ed), else the generic Estimator (str())
  std::string entry_point;    // relative to source_dir; "" = the command after --
  std::string source_dir;     // the entry point's folder and working directory (/opt/ml/code)
  std::vector<JobGroup> groups;
  nlohmann::json hyperparameters = nlohmann::json::object();  // as given to the estimator
  bool torch_distributed = false;
  // The groups the estimator's distribution names. The PyTorch estimator does not pass
  // them to the container (only sagemaker_torch_distributed_enabled), so the toolkit runs
  // torchrun on every group unless the hyperparameter sagemaker_distribution_instance_groups
  // names them: what toolkit_distribution_groups() resolves.
  std::vector<std::string> distribution_groups;
  std::vector<JobChannel> channels;
  std::string checkpoint_dir;  // stands in for checkpoint_s3_uri: restored to every host, synced back after
};

// Reads a job file. Relative paths (source_dir, inputs, checkpoint_dir) are relative to
// the file's folder. Throws ConfigError naming the key and the fix.
SageMakerJob read_sagemaker_job(const std::string& path);

// hyperparameters.json as the estimator writes it: every value json.dumps'ed (framework)
// or str()'d (generic), with the framework estimator's sagemaker_* keys.
nlohmann::json encoded_hyperparameters(const SageMakerJob& job);
// What the toolkit makes of that file: each value json.loads'ed, or kept as a string.
nlohmann::json decoded_hyperparameters(const nlohmann::json& encoded);
// The user's hyperparameters (no sagemaker_* keys) as the toolkit's command line:
// sorted, "--key value" ("-k" for one letter), values as Python's str().
std::vector<std::string> toolkit_args(const nlohmann::json& decoded);

// A value the toolkit's unquoted /bin/sh line would split or misread: the first such
// hyperparameter as "'key' = 'value' (why)", else "".
std::string shell_unsafe_argument(const nlohmann::json& decoded);

// One simulated host.
struct SimHost {
  std::string name;           // "algo-N"
  std::string group;          // its instance group
  std::string instance_type;
  bool trainer = false;       // a GPU family's host: tandem trains there
  int gpus = 0;               // GPUs simulated (SM_NUM_GPUS; torchrun's ranks)
};

// The hosts of `job`, in algo-N order, the groups interleaved (algo-1 of the first
// group, algo-2 of the second, ...): SageMaker numbers hosts with no regard to groups.
std::vector<SimHost> job_hosts(const SageMakerJob& job);

// The hosts of `groups` as `resource_config` (a resourceconfig.json) lists them, group by
// group: the same order on every host (torchrun's nodes, the first its master).
std::vector<std::string> group_hosts(const nlohmann::ordered_json& resource_config,
                                     const std::vector<std::string>& groups);

// The groups whose hosts run torchrun, as the toolkit decides on a host of `group`: the
// hyperparameter sagemaker_distribution_instance_groups, else (torch_distributed on, the
// PyTorch estimator passing no groups) the host's own group, else none.
std::vector<std::string> distribution_groups(const SageMakerJob& job, const nlohmann::json& decoded,
                                             const std::string& group);

// The channels hosts of `group` receive, sorted.
std::vector<std::string> channels_of(const SageMakerJob& job, const std::string& group);

// What hosts[current], whose /opt/ml is `root`, is given: the SM_* variables and the
// toolkit's others (SAGEMAKER_JOB_NAME, CURRENT_HOST, TRAINING_JOB_NAME, MASTER_ADDR,
// PYTHONPATH with the source folder first, ...). `resource_config`: its resourceconfig.json.
std::map<std::string, std::string> toolkit_environment(const SageMakerJob& job, const std::vector<SimHost>& hosts,
                                                       size_t current, const std::string& root,
                                                       const nlohmann::ordered_json& resource_config);

// Writes hosts[current]'s input/config/inputdataconfig.json, links its channels under
// input/data/ and fills checkpoints/ from job.checkpoint_dir. Throws std::runtime_error
// naming the path it could not make.
void write_toolkit_files(const SageMakerJob& job, const std::vector<SimHost>& hosts, size_t current,
                         const std::string& root);

// The command hosts[current] runs, as the toolkit starts the entry point: /bin/sh -c
// "PROGRAM ARGS" (the toolkit joins its command with spaces, unquoted). Under torchrun
// each rank runs the same line with torchrun's variables (torchrun_environment).
// `program`: the interpreter and entry point ("python3 launcher.py").
std::vector<std::string> toolkit_command(const std::vector<std::string>& program, const nlohmann::json& decoded);

// After the run: every host's checkpoints/ back into job.checkpoint_dir (one prefix for all
// hosts, as on S3). Never throws: what cannot be copied is logged.
void sync_checkpoints_back(const SageMakerJob& job, const std::vector<std::string>& roots);

// torchrun's variables for rank `local_rank` of node `node_rank` (of `nnodes`, `nproc` each).
std::map<std::string, std::string> torchrun_environment(int node_rank, int nnodes, int nproc, int local_rank,
                                                        const std::string& master_addr, int master_port);

}  // namespace tandem::launch
