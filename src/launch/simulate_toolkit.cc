#include "simulate_toolkit.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/cluster/cluster.h"
#include "tandem/common/error.h"
#include "tandem/common/launch_env.h"
#include "tandem/common/text.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/launch/simulate.h"

namespace tandem::launch {
namespace fs = std::filesystem;
namespace {

// Without --job: the flags' two groups, the settings given to simulate as the script's
// tandem- hyperparameters (tandem.serve() and tandem.Feed read those), the command after --.
SageMakerJob default_job(const SimulateOptions& sim, const nlohmann::json& given) {
  SageMakerJob job;
  job.source_dir = fs::current_path().string();
  job.groups = {{kDataGroup, sim.worker_instance_type, sim.worker_hosts, 0},
                {kTrainGroup, sim.trainer_instance_type, sim.trainer_hosts, -1}};
  job.groups.erase(std::remove_if(job.groups.begin(), job.groups.end(), [](const JobGroup& g) { return g.count < 1; }),
                   job.groups.end());
  for (const auto& [key, value] : given.items()) job.hyperparameters["tandem-" + key] = value;
  return job;
}

// The interpreter and the entry point: the words after --, else the job's entry_point run
// by --python (else /usr/bin/python3, else python3).
std::vector<std::string> entry_program(const Settings& s, const SageMakerJob& job) {
  if (!s.launch.command.empty()) return s.launch.command;
  if (job.entry_point.empty()) {
    throw ConfigError("simulate --job " + s.simulate.job_file + ": no entry_point, and no command after --: name the "
                      "script (\"entry_point\": \"launcher.py\"), or give -- python3 SCRIPT");
  }
  return {data::python_interpreter(s.data.python), job.entry_point};
}

// The framework container starts the entry point through /bin/sh, unquoted: a value the
// shell would split or misread breaks the job before the script runs. Said here, with the
// way out, instead of as the shell's syntax error on every host.
void check_shell_safe(const SageMakerJob& job, const nlohmann::json& decoded) {
  if (!job.framework) return;
  const std::string bad = shell_unsafe_argument(decoded);
  if (bad.empty()) return;
  throw ConfigError("hyperparameter " + bad + ": SageMaker's PyTorch container passes every hyperparameter to the "
                    "entry point as --key value on one /bin/sh line, unquoted (sagemaker-training-toolkit process.py), "
                    "so this value would break the job before your script starts. Keep hyperparameter values to "
                    "letters, digits and , . : = / + - _ @, and pass such a setting in the script instead (e.g. "
                    "tandem.serve(pipeline=...) and tandem.Feed(pipeline=...), docs/sagemaker.md)");
}

// Host i's processes: the command once, or torchrun's ranks (one per simulated GPU) when
// its group runs torchrun. `ports`: one per host, then one per rendezvous.
void add_host_specs(ToolkitRun& t, size_t i, const ProcessSpec& base, const nlohmann::json& decoded,
                    std::map<std::string, int>& rendezvous, std::vector<int>& ports) {
  const SimHost& h = t.hosts[i];
  const std::vector<std::string> dist = distribution_groups(t.job, decoded, h.group);
  const bool torchrun = t.job.torch_distributed && std::find(dist.begin(), dist.end(), h.group) != dist.end();
  if (!torchrun) {
    t.specs.push_back(base);
    t.owner.push_back(i);
    return;
  }
  const std::vector<std::string> nodes = group_hosts(resource_config(t.hosts, i), dist);
  std::string key;
  for (const std::string& g : dist) key += g + ",";
  if (!rendezvous.count(key)) {
    rendezvous[key] = ports.back();
    ports.pop_back();
  }
  const int nproc = std::max(h.gpus, 1);
  const int node = static_cast<int>(std::find(nodes.begin(), nodes.end(), h.name) - nodes.begin());
  for (int r = 0; r < nproc; ++r) {
    ProcessSpec rank = base;
    rank.name = h.name + "/" + std::to_string(r);
    for (auto& [k, v] : torchrun_environment(node, static_cast<int>(nodes.size()), nproc, r, "127.0.0.1", rendezvous[key])) {
      rank.env[k] = v;
    }
    // One launch of this host's ranks (torchrun's agent is their common parent; here each
    // has its own /bin/sh): rank 0's summary counts the ranks of the same launch.
    rank.env[launch_env::kLaunchId] = fmt::format("simulate-{}-{}", ::getpid(), h.name);
    // Debian's PyTorch 2.x has no libuv, which init_process_group's store asks for by default.
    if (!cluster::process_env("USE_LIBUV")) rank.env["USE_LIBUV"] = "0";
    t.specs.push_back(std::move(rank));
    t.owner.push_back(i);
  }
}

}  // namespace

ToolkitRun toolkit_run(const Settings& settings, const nlohmann::json& given, const std::string& run) {
  ToolkitRun t;
  const SimulateOptions& sim = settings.simulate;
  t.job = sim.job_file.empty() ? default_job(sim, given) : read_sagemaker_job(sim.job_file);
  if (!sim.job_file.empty()) {
    for (const auto& [key, value] : given.items()) {
      if (!t.job.hyperparameters.contains("tandem-" + key)) t.job.hyperparameters["tandem-" + key] = value;
    }
  }
  const nlohmann::json encoded = encoded_hyperparameters(t.job);
  const nlohmann::json decoded = decoded_hyperparameters(encoded);
  check_shell_safe(t.job, decoded);
  const std::vector<std::string> argv = toolkit_command(entry_program(settings, t.job), decoded);
  t.hosts = job_hosts(t.job);
  if (std::none_of(t.hosts.begin(), t.hosts.end(), [](const SimHost& h) { return h.trainer; })) {
    throw ConfigError("simulate: no host of a GPU instance family (ml.p*, ml.g*) in the job, and tandem trains on "
                      "those: give --trainer-hosts 1 or more of a GPU --trainer-instance-type, or such a group in --job");
  }
  std::vector<int> ports = free_loopback_ports(t.hosts.size() + t.job.groups.size());
  const std::vector<int> worker_ports(ports.begin(), ports.begin() + static_cast<long>(t.hosts.size()));
  ports.erase(ports.begin(), ports.begin() + static_cast<long>(t.hosts.size()));
  const std::string map = host_map(t.hosts, worker_ports);
  spdlog::info("simulating SageMaker job {} ({} estimator): {}; every host runs: {}", t.job.job_name,
               t.job.framework ? "PyTorch" : "generic", counted(t.hosts.size(), "host"), argv.back());
  std::map<std::string, int> rendezvous;
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    const std::string root = run + "/" + t.hosts[i].name;
    write_host_root(root, t.hosts, i, encoded);
    write_toolkit_files(t.job, t.hosts, i, root);
    ProcessSpec spec;
    spec.name = t.hosts[i].name;
    spec.argv = argv;
    spec.cwd = t.job.source_dir;
    spec.env = toolkit_environment(t.job, t.hosts, i, root, resource_config(t.hosts, i));
    spec.env.insert({{"TANDEM_HOST_MAP", map}, {"TANDEM_SIMULATED_HOST", t.hosts[i].name}, {"TANDEM_SAGEMAKER_ROOT", root}});
    if (!settings.security.token.empty()) spec.env["TANDEM_TOKEN"] = settings.security.token;
    spec.cpus = host_cpus(static_cast<int>(i), sim.cpus_per_host, std::thread::hardware_concurrency());
    spec.critical = t.hosts[i].trainer;  // a trainer copes with a lost worker; nothing copes with a lost trainer
    add_host_specs(t, i, spec, decoded, rendezvous, ports);
  }
  return t;
}

std::vector<ExitStatus> host_statuses(const ToolkitRun& t, const std::vector<ExitStatus>& statuses) {
  std::vector<ExitStatus> out(t.hosts.size());
  std::vector<bool> seen(t.hosts.size(), false), failed(t.hosts.size(), false);
  for (size_t i = 0; i < statuses.size() && i < t.owner.size(); ++i) {
    const size_t h = t.owner[i];
    const bool bad = statuses[i].signal != 0 || statuses[i].exit_code != 0;
    if (!seen[h] || (bad && !failed[h])) out[h] = statuses[i];
    seen[h] = true;
    failed[h] = failed[h] || bad;
  }
  return out;
}

}  // namespace tandem::launch
