// The job file and the hyperparameters as the SDK writes them and the toolkit reads them.
#include "tandem/launch/sagemaker_job.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tandem/cluster/roles.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::launch {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what, const std::string& fix) {
  throw ConfigError("--job " + path + ": " + what + ": " + fix);
}

std::string string_at(const nlohmann::json& j, const char* key, const std::string& path, const std::string& fallback) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string()) bad(path, std::string("'") + key + "' is not a string", "write it as \"...\"");
  return j[key].get<std::string>();
}

std::vector<std::string> names_at(const nlohmann::json& j, const char* key, const std::string& path) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  if (!j[key].is_array()) bad(path, std::string("'") + key + "' is not a list", "give a list of group names");
  for (const auto& v : j[key]) {
    if (!v.is_string()) bad(path, std::string("'") + key + "' holds " + v.dump(), "give the groups by name");
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::string resolved(const fs::path& base, const std::string& p) {
  if (p.empty()) return p;
  return (fs::path(p).is_absolute() ? fs::path(p) : base / p).lexically_normal().string();
}

std::vector<JobGroup> read_groups(const nlohmann::json& j, const std::string& path) {
  if (!j.contains("instance_groups") || !j["instance_groups"].is_array() || j["instance_groups"].empty()) {
    bad(path, "no 'instance_groups'", "list them as the estimator takes them: [{\"instance_group_name\": ..., "
                                      "\"instance_type\": ..., \"instance_count\": N}, ...]");
  }
  std::vector<JobGroup> groups;
  for (const auto& g : j["instance_groups"]) {
    JobGroup group;
    group.name = string_at(g, "instance_group_name", path, "");
    group.instance_type = string_at(g, "instance_type", path, "");
    if (group.name.empty() || group.instance_type.empty()) {
      bad(path, "an instance group without instance_group_name or instance_type", "give both");
    }
    group.count = g.value("instance_count", 1);
    if (group.count < 1) bad(path, "group " + group.name + " has instance_count " + std::to_string(group.count), "give 1 or more");
    groups.push_back(group);
  }
  return groups;
}

void read_gpus(const nlohmann::json& j, const std::string& path, std::vector<JobGroup>& groups) {
  if (!j.contains("gpus")) return;
  for (const auto& [name, n] : j["gpus"].items()) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const JobGroup& g) { return g.name == name; });
    if (it == groups.end()) bad(path, "'gpus' names no group '" + name + "'", "name one of instance_groups");
    if (!n.is_number_integer() || n.get<int>() < 0) bad(path, "'gpus' of " + name + " is " + n.dump(), "give 0 or more");
    it->gpus = n.get<int>();
  }
}

void read_channels(const nlohmann::json& j, const std::string& path, const fs::path& base, SageMakerJob& job) {
  if (!j.contains("inputs")) return;
  for (const auto& [name, c] : j["inputs"].items()) {
    JobChannel ch;
    ch.name = name;
    ch.path = resolved(base, c.is_string() ? c.get<std::string>() : string_at(c, "path", path, ""));
    if (c.is_object()) {
      ch.input_mode = string_at(c, "input_mode", path, "File");
      ch.groups = names_at(c, "instance_groups", path);
    }
    std::error_code ec;
    if (!fs::is_directory(ch.path, ec)) bad(path, "channel " + name + ": " + ch.path + " is not a folder", "give its data's folder");
    job.channels.push_back(ch);
  }
}

// Python's str() of a JSON value decoded from a hyperparameter (within a list: repr()).
std::string python_str(const nlohmann::json& v, bool inner) {
  if (v.is_string()) {
    if (!inner) return v.get<std::string>();
    std::string out = "'";
    for (char c : v.get<std::string>()) out += (c == '\'' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "'";
  }
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return inner ? "None" : "";
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_str(v[i], true);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, e] : v.items()) {
      out += (first ? "" : ", ") + python_str(k, true) + ": " + python_str(e, true);
      first = false;
    }
    return out + "}";
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == static_cast<double>(static_cast<long long>(d)) && std::abs(d) < 1e16) return std::to_string(static_cast<long long>(d)) + ".0";
  }
  return v.dump();
}

// Python's json.dumps(v) with its default separators (", ", ": ") and ASCII escapes: the
// PyTorch estimator's encoding of each hyperparameter.
std::string python_json(const nlohmann::json& v) {
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_json(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, e] : v.items()) {
      out += (first ? "" : ", ") + nlohmann::json(k).dump(-1, ' ', true) + ": " + python_json(e);
      first = false;
    }
    return out + "}";
  }
  return v.dump(-1, ' ', true);
}

bool has_group(const SageMakerJob& job, const std::string& name) {
  return std::any_of(job.groups.begin(), job.groups.end(), [&](const JobGroup& g) { return g.name == name; });
}

// What SageMaker and the SDK refuse before a job starts, and a job tandem cannot train.
void check_job(const SageMakerJob& job, const std::string& path) {
  size_t assigned = 0;
  for (const JobChannel& c : job.channels) {
    assigned += c.groups.empty() ? 0 : 1;
    for (const std::string& g : c.groups) {
      if (!has_group(job, g)) bad(path, "channel " + c.name + " names no group '" + g + "'", "name one of instance_groups");
    }
  }
  if (assigned != 0 && assigned != job.channels.size()) {
    bad(path, "some channels name instance_groups and others do not", "SageMaker refuses that (\"Some channels have "
        "assigned instance groups\"): name the groups of every channel, or of none");
  }
  for (const std::string& g : job.distribution_groups) {
    const auto it = std::find_if(job.groups.begin(), job.groups.end(), [&](const JobGroup& x) { return x.name == g; });
    if (it == job.groups.end()) bad(path, "the distribution names no group '" + g + "'", "name one of instance_groups");
    if (job.torch_distributed && !cluster::is_gpu_instance_type(it->instance_type)) {
      bad(path, "torch_distributed on " + g + " (" + it->instance_type + ")",
          "the SDK allows it on GPU instance types only (ml.p*, ml.g*)");
    }
  }
  if (std::none_of(job.groups.begin(), job.groups.end(),
                   [](const JobGroup& g) { return cluster::is_gpu_instance_type(g.instance_type); })) {
    bad(path, "no instance group of a GPU family (ml.p*, ml.g*)", "tandem trains on those hosts: add one");
  }
}

}  // namespace

SageMakerJob read_sagemaker_job(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("--job " + path + ": cannot read it: check the path");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object()) bad(path, "not a JSON object", "write the estimator's arguments as one object (docs/sagemaker.md)");
  const fs::path base = fs::absolute(path).parent_path();
  SageMakerJob job;
  job.job_name = string_at(j, "job_name", path, job.job_name);
  const std::string estimator = string_at(j, "estimator", path, "PyTorch");
  if (estimator != "PyTorch" && estimator != "Estimator") bad(path, "'estimator' is " + estimator, "say PyTorch or Estimator");
  job.framework = estimator == "PyTorch";
  job.source_dir = resolved(base, string_at(j, "source_dir", path, "."));
  job.entry_point = string_at(j, "entry_point", path, "");
  job.groups = read_groups(j, path);
  read_gpus(j, path, job.groups);
  if (j.contains("hyperparameters")) {
    if (!j["hyperparameters"].is_object()) bad(path, "'hyperparameters' is not an object", "give {\"name\": value, ...}");
    job.hyperparameters = j["hyperparameters"];
  }
  if (j.contains("distribution")) {
    const nlohmann::json& d = j["distribution"];
    job.torch_distributed = d.contains("torch_distributed") && d["torch_distributed"].value("enabled", false);
    job.distribution_groups = names_at(d, "instance_groups", path);
    if (job.groups.size() > 1 && job.distribution_groups.size() != 1) {
      bad(path, "the distribution names " + std::to_string(job.distribution_groups.size()) + " instance groups",
          "name exactly one, as the SDK requires of a heterogeneous cluster (\"Distribution should only contain one "
          "instance group name\")");
    }
  }
  read_channels(j, path, base, job);
  job.checkpoint_dir = resolved(base, string_at(j, "checkpoint_dir", path, ""));
  check_job(job, path);
  return job;
}

nlohmann::json encoded_hyperparameters(const SageMakerJob& job) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : job.hyperparameters.items()) {
    out[key] = job.framework ? python_json(value) : python_str(value, false);
  }
  if (!job.framework && job.entry_point.empty()) return out;
  // The estimator's own script keys (estimator.py _script_mode_hyperparam_update, JSON-encoded
  // whenever there is an entry point, the generic Estimator's too) and the framework's
  // distribution key (pytorch/estimator.py _pytorch_distribution_configuration).
  out["sagemaker_program"] = nlohmann::json(job.entry_point).dump();
  out["sagemaker_submit_directory"] = nlohmann::json("file://" + job.source_dir).dump();
  out["sagemaker_container_log_level"] = "20";
  out["sagemaker_job_name"] = nlohmann::json(job.job_name).dump();
  out["sagemaker_region"] = nlohmann::json("simulated").dump();
  if (job.framework && job.torch_distributed) out["sagemaker_torch_distributed_enabled"] = "true";
  return out;
}

nlohmann::json decoded_hyperparameters(const nlohmann::json& encoded) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : encoded.items()) {
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    nlohmann::json v = nlohmann::json::parse(text, nullptr, false);
    out[key] = v.is_discarded() ? nlohmann::json(text) : v;
  }
  return out;
}

std::vector<std::string> toolkit_args(const nlohmann::json& decoded) {
  std::vector<std::string> out;  // nlohmann::json keeps an object's keys sorted, as the toolkit sorts them
  for (const auto& [key, value] : decoded.items()) {
    if (key.rfind("sagemaker_", 0) == 0 || key == "_tuning_objective_metric" || key == "default_user_module_name") continue;
    out.push_back((key.size() > 1 ? "--" : "-") + key);
    if (value.is_object()) {
      std::string items;
      for (const auto& [k, v] : value.items()) items += (items.empty() ? "" : ",") + k + "=" + python_str(v, false);
      out.push_back(items);
    } else {
      out.push_back(python_str(value, false));
    }
  }
  return out;
}

std::string shell_unsafe_argument(const nlohmann::json& decoded) {
  const std::vector<std::string> args = toolkit_args(decoded);
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string key = args[i].substr(args[i].rfind("--", 0) == 0 ? 2 : 1);
    const std::string& v = args[i + 1];
    if (v.empty()) return fmt::format("'{}' is empty (the shell drops it, and the next word takes its place)", key);
    const size_t at = v.find_first_of(" \t\n()'\"`$;&|<>*?[]{}\\#~");
    if (at == std::string::npos) continue;
    const std::string c = v[at] == ' ' ? "a space" : v[at] == '\n' ? "a newline" : fmt::format("'{}'", v[at]);
    return fmt::format("'{}' = '{}' ({} is shell syntax)", key, printable(v, 120), c);
  }
  return "";
}

std::vector<std::string> channels_of(const SageMakerJob& job, const std::string& group) {
  std::vector<std::string> out;
  for (const JobChannel& c : job.channels) {
    if (c.groups.empty() || std::find(c.groups.begin(), c.groups.end(), group) != c.groups.end()) out.push_back(c.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, std::string> torchrun_environment(int node_rank, int nnodes, int nproc, int local_rank,
                                                        const std::string& master_addr, int master_port) {
  const std::string world = std::to_string(nnodes * nproc);
  return {{"RANK", std::to_string(node_rank * nproc + local_rank)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"GROUP_RANK", std::to_string(node_rank)},
          {"ROLE_RANK", std::to_string(node_rank * nproc + local_rank)},
          {"ROLE_NAME", "default"},
          {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
          {"WORLD_SIZE", world},
          {"GROUP_WORLD_SIZE", std::to_string(nnodes)},
          {"ROLE_WORLD_SIZE", world},
          {"MASTER_ADDR", master_addr},
          {"MASTER_PORT", std::to_string(master_port)},
          {"TORCHELASTIC_RESTART_COUNT", "0"},
          {"TORCHELASTIC_MAX_RESTARTS", "0"},
          {"TORCHELASTIC_RUN_ID", "none"},
          {"TORCHELASTIC_USE_AGENT_STORE", "False"},
          {"OMP_NUM_THREADS", "1"}};
}

}  // namespace tandem::launch
