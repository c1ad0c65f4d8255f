#include "tandem/launch/simulate.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/files.h"
#include "tandem/common/text.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/launch/rank_group.h"
#include "tandem/launch/run.h"
#include "simulate_results.h"
#include "simulate_toolkit.h"
#include "tandem/report/summary_reader.h"

namespace tandem::launch {

namespace fs = std::filesystem;

std::vector<SimHost> plan_hosts(const SimulateOptions& opts) {
  if (opts.trainer_hosts < 1) {
    throw ConfigError(fmt::format("--trainer-hosts must be at least 1 (got {})",
                                  opts.trainer_hosts));
  }
  if (opts.worker_hosts < 0) {
    throw ConfigError(fmt::format("--worker-hosts must be 0 or more (got {})", opts.worker_hosts));
  }
  std::vector<SimHost> hosts;
  int trainers_left = opts.trainer_hosts;
  int workers_left = opts.worker_hosts;
  // Alternate, data group first, while both groups have hosts left; then the rest.
  // Real SageMaker numbers hosts with no regard to groups, so neither do we.
  bool data_turn = true;
  while (trainers_left > 0 || workers_left > 0) {
    const bool worker = workers_left > 0 && (data_turn || trainers_left == 0);
    SimHost host;
    host.name = "algo-" + std::to_string(hosts.size() + 1);
    host.trainer = !worker;
    host.group = worker ? kDataGroup : kTrainGroup;
    host.instance_type = worker ? opts.worker_instance_type : opts.trainer_instance_type;
    hosts.push_back(host);
    (worker ? workers_left : trainers_left)--;
    data_turn = !data_turn;
  }
  return hosts;
}

nlohmann::ordered_json resource_config(const std::vector<SimHost>& hosts, std::size_t current) {
  const SimHost& me = hosts.at(current);
  nlohmann::ordered_json config;
  config["current_group_name"] = me.group;
  config["current_host"] = me.name;
  config["current_instance_type"] = me.instance_type;
  config["hosts"] = nlohmann::ordered_json::array();
  for (const auto& h : hosts) config["hosts"].push_back(h.name);
  config["instance_groups"] = nlohmann::ordered_json::array();
  std::vector<std::string> groups;
  for (const auto& h : hosts) {
    if (std::find(groups.begin(), groups.end(), h.group) == groups.end()) groups.push_back(h.group);
  }
  for (const std::string& group : groups) {
    nlohmann::ordered_json names = nlohmann::ordered_json::array();
    std::string type;
    // Newest first: SageMaker's group lists are not sorted either (e.g. ["algo-3",
    // "algo-1"]), and readers must not depend on that order.
    for (auto it = hosts.rbegin(); it != hosts.rend(); ++it) {
      if (it->group != group) continue;
      type = it->instance_type;
      names.push_back(it->name);
    }
    if (names.empty()) continue;  // no workers: the group does not exist
    nlohmann::ordered_json entry;
    entry["instance_group_name"] = group;
    entry["instance_type"] = type;
    entry["hosts"] = std::move(names);
    config["instance_groups"].push_back(std::move(entry));
  }
  config["network_interface_name"] = "lo";
  return config;
}

nlohmann::json sagemaker_hyperparameters(const nlohmann::json& hyperparameters) {
  if (hyperparameters.is_null()) return nlohmann::json::object();
  if (!hyperparameters.is_object()) {
    throw ConfigError("simulate: hyperparameters must be a JSON object of name -> value, got " +
                      std::string(hyperparameters.type_name()));
  }
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : hyperparameters.items()) {
    out[key] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return out;
}

std::string host_map(const std::vector<SimHost>& hosts, const std::vector<int>& ports) {
  if (ports.size() != hosts.size()) {
    throw std::invalid_argument("host_map: one port per host is needed");
  }
  std::string map;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (i > 0) map += ',';
    map += fmt::format("{}=127.0.0.1:{}", hosts[i].name, ports[i]);
  }
  return map;
}

std::vector<int> free_loopback_ports(std::size_t n) {
  // All sockets stay bound until every port is known, so the kernel cannot hand out
  // the same port twice.
  std::vector<int> sockets;
  std::vector<int> ports;
  auto close_all = [&] {
    for (int s : sockets) close(s);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      const std::string why = std::strerror(errno);
      if (s >= 0) close(s);
      close_all();
      throw std::runtime_error("cannot find a free port on 127.0.0.1: " + why);
    }
    sockets.push_back(s);
    ports.push_back(ntohs(addr.sin_port));
  }
  close_all();
  return ports;
}

std::vector<int> host_cpus(int index, int per_host, unsigned ncpus) {
  std::vector<int> cpus;
  if (per_host <= 0) return cpus;
  const long n = std::max(1u, ncpus);
  for (long c = static_cast<long>(index) * per_host; c < static_cast<long>(index + 1) * per_host;
       ++c) {
    cpus.push_back(static_cast<int>(c % n));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string oversubscription(int per_host, std::size_t hosts, unsigned ncpus) {
  const auto wanted = static_cast<unsigned long long>(std::max(per_host, 0)) * hosts;
  if (per_host <= 0 || ncpus == 0 || wanted <= ncpus) return "";
  const std::string fix = ncpus >= hosts ? fmt::format("give at most --cpus-per-host {} (or 0: no pinning)", ncpus / hosts)
                                         : std::string("give --cpus-per-host 0 (no pinning): there are fewer cores than hosts");
  return fmt::format("--cpus-per-host {} x {} hosts asks for {} cores, but this machine has {}: hosts share cores, "
                     "so the rates measured here are lower than separate hosts would reach; {}",
                     per_host, hosts, wanted, ncpus, fix);
}

namespace {


std::string make_run_dir(const std::string& requested) {
  if (!requested.empty()) {
    fs::create_directories(requested);
    return fs::absolute(requested).string();
  }
  std::string tmpl = "/tmp/tandem-sim-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a run directory in /tmp: " +
                             std::string(std::strerror(errno)));
  }
  return tmpl;
}

// 128 random bits as hex: a fresh token for each simulated job.
std::string random_token() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  unsigned char bytes[16] = {};
  urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  if (!urandom) throw std::runtime_error("cannot read /dev/urandom for the simulated job's token");
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

std::vector<ProcessSpec> host_specs(const Settings& settings, const std::vector<SimHost>& hosts,
                                    const std::vector<int>& ports, const std::string& run,
                                    const std::string& tandem_exe) {
  const std::string map = host_map(hosts, ports);
  // Like a real job, the simulated one has a token its hosts share (through the
  // environment), so nothing else on this machine can speak to its workers.
  const std::string token = settings.security.token.empty() ? random_token() : settings.security.token;
  // And a job name (SageMaker's variable, as on a real job), the run directory's: its
  // workers serve no other job.
  const fs::path run_dir = fs::path(run).filename().empty() ? fs::path(run).parent_path() : fs::path(run);
  const std::string job = settings.security.job.empty() ? run_dir.filename().string() : settings.security.job;
  spdlog::info("TANDEM_HOST_MAP={}", map);
  const unsigned ncpus = std::thread::hardware_concurrency();
  std::vector<ProcessSpec> specs;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    ProcessSpec spec;
    spec.name = hosts[i].name;
    const std::string root = run + "/" + hosts[i].name;
    spec.argv = {tandem_exe, "launch", "--sagemaker-root", root};
    spec.env = {{"TANDEM_HOST_MAP", map}, {"TANDEM_SIMULATED_HOST", hosts[i].name}, {"TANDEM_TOKEN", token},
                {"TRAINING_JOB_NAME", job}};
    spec.cpus = host_cpus(static_cast<int>(i), settings.simulate.cpus_per_host, ncpus);
    // A trainer copes with a lost worker; nothing copes with a lost trainer.
    spec.critical = hosts[i].trainer;
    specs.push_back(std::move(spec));
  }
  return specs;
}


}  // namespace

void write_host_root(const std::string& root, const std::vector<SimHost>& hosts,
                     std::size_t index, const nlohmann::json& hyperparameters) {
  const fs::path base(root);
  for (const char* dir : {"input/config", "output/data", "model", "checkpoints"}) {
    fs::create_directories(base / dir);
  }
  fs::remove(base / "output/data/summary.json");
  fs::remove(base / "output/failure");
  write_file_atomically((base / "input/config/resourceconfig.json").string(), resource_config(hosts, index).dump());
  write_file_atomically((base / "input/config/hyperparameters.json").string(), hyperparameters.dump());
}

std::string status_table(const std::vector<SimHost>& hosts,
                         const std::vector<ExitStatus>& statuses) {
  std::size_t width = 4;
  for (const auto& h : hosts) width = std::max(width, h.name.size());
  std::string table = fmt::format("{:<{}}  {:<7}  {}\n", "host", width, "role", "status");
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::string status = i < statuses.size() ? statuses[i].describe() : "not started";
    table += fmt::format("{:<{}}  {:<7}  {}\n", hosts[i].name, width,
                         hosts[i].trainer ? "trainer" : "worker", status);
  }
  return table;
}

namespace {

// How the cluster's processes are supervised under simulate.
SuperviseOptions simulate_supervision(const SimulateOptions& sim) {
  SuperviseOptions opts;
  opts.timeout_s = sim.timeout_s;
  // Data workers normally exit within a second of the trainers' Shutdown RPC; this only
  // catches a worker that never got it, so the run does not sit until timeout_s.
  opts.linger_s = 30;
  opts.grace_s = 60;  // workers serve a stopping trainer up to --term-grace (30 s)
  // Here a worker host that exits is gone for good (nothing restarts it), and a trainer
  // without workers only waits for them: once all have failed, the run is over.
  opts.stop_when_helpers_fail = true;
  return opts;
}

// The exit code of the whole simulated job, by the rank group's rule one level up (each
// trainer host's `tandem launch` already exits by it): that of the trainer host whose
// failure ended the job, else of the first that did not exit 0 (75 when they were
// interrupted and checkpointed); with every trainer host ok, 1 when a worker host failed
// (a worker stopped by the stop itself, 75 or SIGTERM, did not).
int simulate_exit_code(const std::vector<SimHost>& hosts, const std::vector<ExitStatus>& statuses) {
  std::vector<ExitStatus> trainers;
  bool workers_ok = true;
  for (size_t i = 0; i < hosts.size() && i < statuses.size(); ++i) {
    if (hosts[i].trainer) trainers.push_back(statuses[i]);
    else workers_ok &= worker_did_not_fail(statuses[i]);
  }
  const int code = job_exit_code(trainers);
  return code != kExitOk || workers_ok ? code : kExitFailed;
}

// The tandem settings simulate was given, as the script's hyperparameters carry them
// under --every-host: not the command, which the hosts run, nor the GPU check's lifting,
// which only tandem's own trainer reads.
nlohmann::json script_settings(const nlohmann::json& hp) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : hp.items()) {
    if (key == "command" || key == "script" || key == "script-args" || key == "allow-cpu-training") continue;
    out[key] = value;
  }
  return out;
}

// Without --every-host: `tandem launch` on every host, the settings in hyperparameters.json.
std::vector<ProcessSpec> launch_specs(const Settings& settings, const nlohmann::json& hyperparameters,
                                      const std::vector<SimHost>& hosts, const std::string& run,
                                      const std::string& tandem_exe) {
  nlohmann::json hp = sagemaker_hyperparameters(hyperparameters);
  // Every host's worker port, the trainers' rendezvous port and the port of their end
  // reports (release_gate.h), chosen in one go so that none can be handed out twice.
  std::vector<int> ports = free_loopback_ports(hosts.size() + 2);
  if (!hp.contains("release-port")) hp["release-port"] = std::to_string(ports.back());
  ports.pop_back();
  if (!hp.contains("master-port")) hp["master-port"] = std::to_string(ports.back());
  ports.pop_back();
  for (std::size_t i = 0; i < hosts.size(); ++i) write_host_root(run + "/" + hosts[i].name, hosts, i, hp);
  return host_specs(settings, hosts, ports, run, tandem_exe);
}

}  // namespace

int run_simulate(const Settings& settings, const nlohmann::json& hyperparameters,
                 const std::string& tandem_exe) {
  if (settings.simulate.cpus_per_host < 0) {
    throw ConfigError(fmt::format("--cpus-per-host must be 0 (no pinning) or more (got {})",
                                  settings.simulate.cpus_per_host));
  }
  const bool toolkit = settings.simulate.every_host || !settings.simulate.job_file.empty();
  const std::string run = make_run_dir(settings.simulate.run_dir);
  std::optional<ToolkitRun> script;
  std::vector<SimHost> hosts;
  std::vector<ProcessSpec> specs;
  if (toolkit) {
    script = toolkit_run(settings, script_settings(hyperparameters), run);
    hosts = script->hosts;
    specs = script->specs;
  } else {
    hosts = plan_hosts(settings.simulate);
    spdlog::info("simulating {} and {} in {}", counted(settings.simulate.trainer_hosts, "trainer host"),
                 counted(settings.simulate.worker_hosts, "worker host"), run);
    specs = launch_specs(settings, hyperparameters, hosts, run, tandem_exe);
  }
  const std::string shared = oversubscription(settings.simulate.cpus_per_host, hosts.size(),
                                              std::thread::hardware_concurrency());
  if (!shared.empty()) spdlog::warn("{}", shared);
  bool signalled = false;  // simulate itself was stopped (SIGTERM, Ctrl-C)
  SuperviseOptions supervision = simulate_supervision(settings.simulate);
  supervision.signalled = &signalled;
  const std::vector<ExitStatus> ran = supervise(specs, supervision);
  const std::vector<ExitStatus> statuses = script ? host_statuses(*script, ran) : ran;
  if (script) {
    std::vector<std::string> roots;
    for (const SimHost& h : hosts) roots.push_back(run + "/" + h.name);
    sync_checkpoints_back(script->job, roots);
  }

  std::cout << status_table(hosts, statuses);
  // Stopped from outside, the workers died of our SIGTERM: that is no loss to report.
  const std::string lost = signalled ? std::string() : workers_failed(run, hosts, statuses);
  const auto trainer = std::find_if(hosts.begin(), hosts.end(), [](const SimHost& h) { return h.trainer; });
  if (lost.empty() || (trainer != hosts.end() && fs::exists(fs::path(run) / trainer->name / "output/data/summary.json"))) {
    print_summary(run, hosts, settings.trainer.summary_json);
  }
  if (lost.empty()) print_failures(run, hosts);
  std::cout << std::flush;
  // Stopped from outside, the run is interrupted (75), whatever the hosts' own programs
  // exited with on the stop (a command's ranks: 128 + SIGTERM, or as the script decides).
  const int ended = simulate_exit_code(hosts, statuses);
  const int code = signalled && ended != kExitOk ? kExitInterrupted : ended;
  if (code == kExitOk && settings.simulate.run_dir.empty() && !settings.simulate.keep) tidy_run_dir(run, hosts);
  spdlog::info("run directory: {}", run);
  if (const std::string model = trained_model(run, hosts); !model.empty()) {
    spdlog::info("trained model: {} (model.json beside it says how to load it)", model);
  }
  if (!lost.empty()) {
    spdlog::error("{}", lost);
    return kExitFailed;
  }
  return code;
}

}  // namespace tandem::launch
