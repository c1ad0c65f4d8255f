// What SageMaker's training toolkit gives one host of a simulated job: its environment,
// its input files and channels, its checkpoints, and the command it runs.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "tandem/cluster/cluster.h"
#include "tandem/cluster/roles.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/launch/sagemaker_job.h"

namespace tandem::launch {
namespace fs = std::filesystem;
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

// The toolkit's value of an environment variable: a string as it is, anything else
// compact JSON with sorted keys (mapping.py to_env_vars).
std::string env_value(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The list of files a host was given from the checkpoint store, beside its /opt/ml stand-in.
constexpr const char* kRestored = ".restored-checkpoints";

// Regular files under `dir` by their path relative to it.
std::map<std::string, fs::path> files_under(const std::string& dir) {
  std::map<std::string, fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = e.path();
  }
  return out;
}

// Copies `from` to `to` (making its folder) with its modification time, which the sync
// back compares.
void copy_with_time(const fs::path& from, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  fs::last_write_time(to, fs::last_write_time(from));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (nl > start) out.push_back(text.substr(start, nl - start));
  }
  return out;
}

bool reserved(const std::string& key) {
  return key.rfind("sagemaker_", 0) == 0 || key == "_tuning_objective_metric" || key == "default_user_module_name";
}

nlohmann::json input_data_config(const SageMakerJob& job, const std::vector<std::string>& names) {
  nlohmann::json out = nlohmann::json::object();
  for (const JobChannel& c : job.channels) {
    if (std::find(names.begin(), names.end(), c.name) == names.end()) continue;
    out[c.name] = {{"RecordWrapperType", "None"}, {"S3DistributionType", "FullyReplicated"},
                   {"TrainingInputMode", c.input_mode}};
  }
  return out;
}

// The toolkit's Environment properties (SM_TRAINING_ENV) for a host.
nlohmann::json training_env(const SageMakerJob& job, const SimHost& me, const std::string& root,
                            const nlohmann::ordered_json& rc, const nlohmann::json& decoded) {
  nlohmann::json hps = nlohmann::json::object(), framework = nlohmann::json::object();
  for (const auto& [k, v] : decoded.items()) (reserved(k) ? framework : hps)[k] = v;
  for (const char* k : {"sagemaker_program", "sagemaker_submit_directory", "sagemaker_container_log_level",
                        "sagemaker_job_name", "sagemaker_region"}) framework.erase(k);
  const std::vector<std::string> channels = channels_of(job, me.group);
  nlohmann::json dirs = nlohmann::json::object(), groups = nlohmann::json::array(), dict = nlohmann::json::object();
  for (const std::string& c : channels) dirs[c] = root + "/input/data/" + c;
  for (const auto& g : rc["instance_groups"]) {
    groups.push_back(g["instance_group_name"].get<std::string>());
    dict[g["instance_group_name"].get<std::string>()] = nlohmann::json::parse(g.dump());
  }
  const std::vector<std::string> dist = distribution_groups(job, decoded, me.group);
  const std::vector<std::string> dist_hosts = group_hosts(rc, dist);
  const std::string master = dist_hosts.empty() ? rc["hosts"][0].get<std::string>() : dist_hosts.front();
  const std::string entry = job.entry_point;
  return {{"additional_framework_parameters", framework}, {"channel_input_dirs", dirs},
          {"current_host", me.name}, {"current_instance_group", me.group},
          {"current_instance_group_hosts", group_hosts(rc, {me.group})}, {"current_instance_type", me.instance_type},
          {"distribution_hosts", dist_hosts}, {"distribution_instance_groups", dist},
          {"framework_module", job.framework ? "sagemaker_pytorch_container.training:main" : ""},
          {"hosts", rc["hosts"].get<std::vector<std::string>>()}, {"hyperparameters", hps}, {"input_config_dir", root + "/input/config"},
          {"input_data_config", input_data_config(job, channels)}, {"input_dir", root + "/input"},
          {"instance_groups", groups}, {"instance_groups_dict", dict}, {"is_hetero", groups.size() > 1},
          {"is_master", me.name == master}, {"job_name", job.job_name}, {"log_level", 20},
          {"master_hostname", master}, {"model_dir", root + "/model"}, {"module_dir", "file://" + job.source_dir},
          {"module_name", entry.size() > 3 && entry.substr(entry.size() - 3) == ".py" ? entry.substr(0, entry.size() - 3) : entry},
          {"network_interface_name", rc["network_interface_name"].get<std::string>()},
          {"num_cpus", std::max(1u, std::thread::hardware_concurrency())}, {"num_gpus", me.gpus}, {"num_neurons", 0},
          {"output_data_dir", root + "/output/data"}, {"output_dir", root + "/output"},
          {"output_intermediate_dir", root + "/output/intermediate"},
          {"resource_config", nlohmann::json::parse(rc.dump())}, {"user_entry_point", entry}};
}

}  // namespace

std::vector<std::string> group_hosts(const nlohmann::ordered_json& resource_config,
                                     const std::vector<std::string>& groups) {
  std::vector<std::string> out;
  for (const auto& g : resource_config["instance_groups"]) {
    if (std::find(groups.begin(), groups.end(), g["instance_group_name"].get<std::string>()) == groups.end()) continue;
    for (const auto& h : g["hosts"]) out.push_back(h.get<std::string>());
  }
  return out;
}

std::vector<SimHost> job_hosts(const SageMakerJob& job) {
  std::vector<int> left;
  for (const JobGroup& g : job.groups) left.push_back(g.count);
  std::vector<SimHost> hosts;
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < job.groups.size(); ++i) {
      if (left[i]-- <= 0) continue;
      any = true;
      const JobGroup& g = job.groups[i];
      const bool gpu = cluster::is_gpu_instance_type(g.instance_type);
      hosts.push_back({"algo-" + std::to_string(hosts.size() + 1), g.name, g.instance_type, gpu,
                       g.gpus >= 0 ? g.gpus : (gpu ? 1 : 0)});
    }
  }
  return hosts;
}

std::vector<std::string> distribution_groups(const SageMakerJob& job, const nlohmann::json& decoded,
                                             const std::string& group) {
  std::vector<std::string> out;
  if (decoded.contains("sagemaker_distribution_instance_groups")) {
    for (const auto& g : decoded["sagemaker_distribution_instance_groups"]) out.push_back(env_value(g));
  } else if (job.torch_distributed) {
    out.push_back(group);
  }
  return out;
}

std::map<std::string, std::string> toolkit_environment(const SageMakerJob& job, const std::vector<SimHost>& hosts,
                                                       size_t current, const std::string& root,
                                                       const nlohmann::ordered_json& resource_config) {
  const SimHost& me = hosts.at(current);
  const nlohmann::json decoded = decoded_hyperparameters(encoded_hyperparameters(job));
  const nlohmann::json env = training_env(job, me, root, resource_config, decoded);
  std::map<std::string, std::string> out;
  for (const char* key : {"current_host", "current_instance_group", "current_instance_group_hosts",
                          "current_instance_type", "distribution_instance_groups", "framework_module", "hosts",
                          "input_config_dir", "input_dir", "instance_groups", "instance_groups_dict", "is_hetero",
                          "log_level", "model_dir", "module_dir", "module_name", "network_interface_name", "num_cpus",
                          "num_gpus", "num_neurons", "output_data_dir", "output_dir", "output_intermediate_dir",
                          "resource_config", "user_entry_point"}) {
    out["SM_" + upper(key)] = env_value(env[key]);
  }
  out["SM_HPS"] = env["hyperparameters"].dump();
  out["SM_FRAMEWORK_PARAMS"] = env["additional_framework_parameters"].dump();
  out["SM_INPUT_DATA_CONFIG"] = env["input_data_config"].dump();
  out["SM_TRAINING_ENV"] = env.dump();
  nlohmann::json names = nlohmann::json::array();
  for (const auto& [name, dir] : env["channel_input_dirs"].items()) {
    names.push_back(name);
    out["SM_CHANNEL_" + upper(name)] = dir.get<std::string>();
  }
  out["SM_CHANNELS"] = names.dump();
  for (const auto& [k, v] : env["hyperparameters"].items()) out["SM_HP_" + upper(k)] = env_value(v);
  out["SM_USER_ARGS"] = nlohmann::json(toolkit_args(decoded)).dump();
  // The toolkit's and the PyTorch container's other variables, and the platform's.
  out["SAGEMAKER_JOB_NAME"] = out["TRAINING_JOB_NAME"] = job.job_name;
  out["CURRENT_HOST"] = me.name;
  out["SAGEMAKER_REGION"] = "simulated";
  out["MASTER_ADDR"] = "127.0.0.1";  // env["master_hostname"], as this machine's host map resolves it
  out["MASTER_PORT"] = "7777";
  out["NCCL_SOCKET_IFNAME"] = env_value(env["network_interface_name"]);
  const std::string path = cluster::process_env("PYTHONPATH").value_or("");
  out["PYTHONPATH"] = job.source_dir + (path.empty() ? "" : ":" + path);
  return out;
}

void write_toolkit_files(const SageMakerJob& job, const std::vector<SimHost>& hosts, size_t current,
                         const std::string& root) {
  const std::vector<std::string> names = channels_of(job, hosts.at(current).group);
  write_file_atomically(root + "/input/config/inputdataconfig.json", input_data_config(job, names).dump());
  fs::remove_all(fs::path(root) / "input/data");
  fs::create_directories(fs::path(root) / "input/data");
  for (const JobChannel& c : job.channels) {
    if (std::find(names.begin(), names.end(), c.name) == names.end()) continue;  // not this group's
    fs::create_directory_symlink(fs::absolute(c.path), fs::path(root) / "input/data" / c.name);
  }
  const fs::path checkpoints = fs::path(root) / "checkpoints";
  fs::remove_all(checkpoints);
  fs::create_directories(checkpoints);
  std::string restored;  // what the host was given: a file it deletes is deleted from the store
  if (!job.checkpoint_dir.empty() && fs::is_directory(job.checkpoint_dir)) {
    for (const auto& [rel, from] : files_under(job.checkpoint_dir)) {
      copy_with_time(from, checkpoints / rel);
      restored += rel + "\n";
    }
  }
  write_file_atomically((fs::path(root) / kRestored).string(), restored);
}

void sync_checkpoints_back(const SageMakerJob& job, const std::vector<std::string>& roots) {
  if (job.checkpoint_dir.empty()) return;
  const fs::path store(job.checkpoint_dir);
  for (const std::string& root : roots) {
    try {
      // As SageMaker syncs /opt/ml/checkpoints to one S3 prefix: what a host wrote or changed
      // goes up (the newest write of a file wins), what it deleted goes away; a copy it was
      // given and left alone changes nothing.
      const std::map<std::string, fs::path> now = files_under((fs::path(root) / "checkpoints").string());
      for (const auto& [rel, file] : now) {
        std::error_code ec;
        if (!fs::exists(store / rel) || fs::last_write_time(file) > fs::last_write_time(store / rel, ec)) {
          copy_with_time(file, store / rel);
        }
      }
      for (const std::string& rel : lines_of(read_file((fs::path(root) / kRestored).string()).value_or(""))) {
        if (!now.count(rel)) fs::remove(store / rel);
      }
    } catch (const std::exception& e) {
      spdlog::warn("could not sync {}/checkpoints to {}: {}", root, job.checkpoint_dir, e.what());
    }
  }
}

std::vector<std::string> toolkit_command(const std::vector<std::string>& program, const nlohmann::json& decoded) {
  // exec: the script is the host's process (dash would otherwise stay its parent, die of a
  // stop at once and leave the script to be killed), with the same unquoted word splitting.
  std::vector<std::string> words = {"exec"};
  words.insert(words.end(), program.begin(), program.end());
  const std::vector<std::string> args = toolkit_args(decoded);
  words.insert(words.end(), args.begin(), args.end());
  return {"/bin/sh", "-c", joined(words, " ")};
}

}  // namespace tandem::launch
