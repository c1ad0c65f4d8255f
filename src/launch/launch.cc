#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include "tandem/cluster/cluster.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/roles.h"
#include "tandem/common/error.h"
#include "tandem/common/launch_env.h"
#include "tandem/common/signals.h"
#include "tandem/common/text.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/launch/process.h"
#include "tandem/launch/rank_env.h"
#include "tandem/launch/rank_group.h"
#include "tandem/launch/release_gate.h"
#include "tandem/launch/run.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"

namespace tandem::launch {
namespace {


// What every rank of this host is told: MASTER_ADDR is the first trainer host (sorted by
// name, so every host picks the same one), MASTER_PORT the --master-port every host reads
// from the same settings.
RankContext rank_context(const Settings& settings, const cluster::RolePlan& plan,
                         const std::vector<std::string>& targets) {
  const ClusterOptions& c = settings.cluster;
  RankContext ctx;
  ctx.master_addr =
      cluster::resolve_host(cluster::worker_endpoint(plan.trainer_hosts.front(), c).address, c.resolve_timeout_s);
  ctx.master_port = settings.trainer.master_port;
  ctx.workers = targets;
  ctx.token = settings.security.token;
  ctx.job = settings.security.job;
  ctx.sagemaker_root = c.sagemaker_root;
  ctx.host = plan.trainer_hosts.at(plan.host_index);
  return ctx;
}

// --stop-grace, or the platform's: SageMaker SIGKILLs the container 120 s after its
// SIGTERM, so the ranks get 110 and the launcher keeps 10 for output/failure and the
// workers' release.
double stop_grace(const LaunchOptions& opts, const cluster::Cluster& c) {
  if (opts.stop_grace_s >= 0) return opts.stop_grace_s;
  return c.platform == cluster::Platform::kSageMaker ? 110 : 30;
}

// A --script that is not there is one message before any rank starts.
void check_script(const LaunchOptions& opts) {
  if (opts.script.empty()) return;
  std::error_code ec;
  if (std::filesystem::is_regular_file(opts.script, ec)) return;
  throw ConfigError("--script " + printable(opts.script, 200) + ": no such file (relative paths start at " +
                    std::filesystem::current_path(ec).string() +
                    "): give the script's path, e.g. /opt/ml/input/data/code/train.py for a channel named code");
}

// Ranks on this host: --procs-per-host, else one per GPU, else 1. `own_torch`: the ranks
// run tandem's trainer, so the GPUs are those its LibTorch sees.
int ranks_on_host(const Settings& settings, const cluster::Cluster& c, bool own_torch) {
  if (settings.trainer.procs_per_host > 0) return settings.trainer.procs_per_host;
  const int gpus = own_torch ? training::cuda_device_count() : host_gpus();
  if (gpus == 0 && cluster::is_gpu_instance_type(c.current_instance_type) && !settings.trainer.allow_cpu_training) {
    spdlog::warn("host {} is a {} (a GPU instance family) but no GPU is visible here (no /dev/nvidia*, and LibTorch "
                 "sees none): starting 1 rank, which trains on the CPU unless its own torch finds one; check the "
                 "GPU driver and NVIDIA_VISIBLE_DEVICES, or give --procs-per-host",
                 c.current_host, c.current_instance_type);
  }
  return std::max(gpus, 1);
}

// On Slurm, the ports not given are the job's own (with_job_ports): two jobs
// sharing a node then neither fail to listen nor dial each other's workers.
Settings job_ports(const Settings& given, const cluster::Cluster& c) {
  const std::optional<cluster::JobPorts> ports = cluster::slurm_job_ports(c);
  if (!ports || (given.cluster.worker_port_given && given.cluster.master_port_given)) return given;
  Settings s = with_job_ports(given, c);
  std::ifstream range_file("/proc/sys/net/ipv4/ip_local_port_range");
  std::string range;
  std::getline(range_file, range);
  if (const std::string clash = cluster::ephemeral_clash(*ports, range); !clash.empty()) spdlog::warn("{}", clash);
  spdlog::info("Slurm job {}: data workers on port {}, the trainers' rendezvous on {} and their reports on {} "
               "(from the job's id, so that jobs sharing a node do not collide; --worker-port, --master-port and "
               "--release-port choose others)",
               ports->job, s.cluster.worker_port, s.trainer.master_port,
               s.launch.release_port > 0 ? s.launch.release_port : s.trainer.master_port + 1);
  return s;
}

// --share-streams for a job of `ranks`: "auto" shares them past kShareStreamsAbove.
bool shares_streams(const std::string& mode, int ranks) {
  return mode == "on" || (mode == "auto" && ranks > kShareStreamsAbove);
}

// This host's rank group but for its program (rank_group.h): what every rank is told,
// how many there are, the grace of a stop, and its part in the end-of-job barrier (the
// first trainer host hears from the others and releases the workers; the others report).
RankGroupOptions group_options(const Settings& settings, const cluster::Cluster& c, const cluster::RolePlan& plan,
                               const std::vector<std::string>& targets, int procs) {
  RankGroupOptions o;
  o.procs = procs;
  o.context = rank_context(settings, plan, targets);
  o.context.host_types = cluster::host_types(c);
  o.context.gloo_address =
      cluster::resolve_host(cluster::worker_endpoint(o.context.host, settings.cluster).address, settings.cluster.resolve_timeout_s);
  o.context.omp_threads = omp_threads_per_rank(available_cores(), o.procs,
                                               cluster::process_env(launch_env::kOmpThreads).has_value());
  if (!cluster::process_env(launch_env::kGlooInterface)) o.context.network_interface = c.network_interface;
  o.context.libuv_off = !cluster::process_env(launch_env::kUseLibuv).has_value();
  o.group_rank = plan.host_index;
  o.groups = static_cast<int>(plan.trainer_hosts.size());
  o.grace_s = stop_grace(settings.launch, c);
  o.failure_root = settings.cluster.sagemaker_root;
  o.security = settings.security;
  o.share_streams = shares_streams(settings.launch.share_streams, procs * static_cast<int>(plan.trainer_hosts.size()));
  // Several trainer hosts share a job channel (release_gate.h): the first serves it, the
  // others watch it, so that one host's failure ends them all; and the first releases
  // the workers once every host's ranks have ended.
  if (plan.host_index == 0) {
    o.release = targets;
    o.peers.assign(plan.trainer_hosts.begin() + 1, plan.trainer_hosts.end());
    o.worker_hosts = plan.worker_hosts;
  } else {
    o.report_to = o.context.master_addr;
  }
  if (plan.trainer_hosts.size() > 1 || !plan.worker_hosts.empty()) {
    o.release_port = release_port(settings.launch, settings.trainer.master_port);
    o.release_bind = settings.worker.bind;
    o.release_wait_s = settings.launch.release_wait_s;
  }
  return o;
}

// The ranks of a user's command: `given` (the settings given, a JSON object) reaches them
// as TANDEM_SETTINGS.
int run_command(const Settings& settings, const cluster::Cluster& c, const cluster::RolePlan& plan,
                const std::vector<std::string>& targets, std::vector<std::string> argv, const std::string& given) {
  check_script(settings.launch);
  argv[0] = find_command(argv[0], cluster::process_env("PATH").value_or("/usr/local/bin:/usr/bin:/bin"));
  RankGroupOptions o = group_options(settings, c, plan, targets, ranks_on_host(settings, c, false));
  o.argv = std::move(argv);
  o.context.settings_json = given;
  return run_rank_group(o);
}

// The ranks of tandem's own trainer: each a `tandem trainer` given this command's own
// flags (`forwarded`).
int run_trainer_ranks(const Settings& settings, const cluster::Cluster& c, const cluster::RolePlan& plan,
                      const std::vector<std::string>& targets, const std::vector<std::string>& forwarded,
                      const std::string& given, int procs) {
  RankGroupOptions o = group_options(settings, c, plan, targets, procs);
  o.argv = {std::filesystem::read_symlink("/proc/self/exe"), "trainer", "--sagemaker-root",
            settings.cluster.sagemaker_root, "--current-host", o.context.host};
  if (!settings.cluster.config_file.empty()) o.argv.insert(o.argv.end(), {"--config", settings.cluster.config_file});
  // Workers named by DNS are resolved by each rank again, and again as the run goes
  // (feed::WorkerDirectory): the addresses found here would stay when a name drops them.
  const bool by_name = !cluster::worker_services(settings.trainer.workers, settings.trainer.worker_service,
                                                 settings.cluster).empty();
  if (!targets.empty() && !by_name) o.argv.insert(o.argv.end(), {"--workers", joined(targets)});
  o.argv.insert(o.argv.end(), forwarded.begin(), forwarded.end());
  o.shown = "tandem trainer";
  o.context.settings_json = given;
  return run_rank_group(o);
}

// A trainer on a GPU instance family that cannot use a GPU would train on the CPU
// without a word, at a fraction of the speed the job pays for: refuse unless asked.
void check_gpu(const cluster::Cluster& c, const TrainerOptions& opts) {
  int gpus = -1;
  for (const auto& g : c.groups) {
    if (g.name == c.current_group) gpus = g.gpus_per_host;
  }
  const bool has_gpus = gpus > 0 || (gpus < 0 && cluster::is_gpu_instance_type(c.current_instance_type));
  if (!has_gpus) return;
  const std::string kind = gpus > 0 ? "host with " + std::to_string(gpus) + " GPUs (" + c.source + ")"
                                    : c.current_instance_type + " (a GPU instance family)";
  const training::TorchRuntime rt = training::torch_runtime();
  const std::string why = training::why_no_gpu(rt);
  if (why.empty()) return;
  if (opts.allow_cpu_training) {
    spdlog::warn("host {} is a {} but trains on the CPU (--allow-cpu-training): {}", c.current_host, kind, why);
    return;
  }
  throw ConfigError("host " + c.current_host + " is a " + kind + " but cannot train on a GPU: " + why +
                    "; or pass --allow-cpu-training to train on its CPU anyway");
}

// --role-only (tandem.serve()): this host's role as one JSON line on stdout; runs nothing.
int print_role(const cluster::Cluster& c, const ClusterOptions& co, const std::vector<std::string>& named) {
  nlohmann::json out = {{"host", c.current_host}, {"group", c.current_group},
                        {"instance_type", c.current_instance_type}, {"source", c.source}};
  if (c.ranks_started) {  // torchrun started this process as a rank: it trains
    out["role"] = "trainer";
    out["ranks_started"] = true;
    out["workers"] = named;
  } else {
    const cluster::RolePlan plan = cluster::resolve_roles(c, co);
    out["role"] = cluster::role_name(plan.role);
    out["ranks_started"] = false;
    out["trainer_hosts"] = plan.trainer_hosts;
    out["worker_hosts"] = plan.worker_hosts;
    out["workers"] = plan.role == cluster::Role::kWorker ? std::vector<std::string>{}
                     : !named.empty()                    ? named
                                                         : cluster::group_worker_targets(plan.worker_hosts, co);
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int run_launch(const Settings& given_settings, const std::vector<std::string>& forwarded, const std::string& given) {
  // The role's SignalWatcher takes SIGTERM later; threads started before it (CUDA's,
  // when the GPU check loads the runtime) must not take it instead and die of it.
  block_stop_signals();
  const cluster::Cluster c = cluster::discover(given_settings.cluster);
  const Settings settings = job_ports(given_settings, c);
  const ClusterOptions& co = settings.cluster;
  const std::vector<std::string> named =
      cluster::explicit_worker_targets(settings.trainer.workers, settings.trainer.worker_service, co);
  if (settings.launch.role_only) return print_role(c, co, named);
  const std::vector<std::string> command =
      rank_command(settings.launch, data::python_interpreter(settings.data.python));
  if (c.ranks_started && !command.empty()) {
    throw ConfigError("this process is already one rank (" + c.source + "), so it cannot start ranks of " +
                      printable(command.front(), 200) + ": let that launcher run the command itself");
  }
  if (c.ranks_started) {
    // torchrun (or a Kubeflow PyTorchJob) started this process as one rank, with its own
    // MASTER_ADDR and MASTER_PORT: train as that rank, start nothing.
    auto detail = [&c](const char* key, const std::string& unset) {
      auto it = c.details.find(key);
      return it == c.details.end() ? unset : it->second;
    };
    spdlog::info("rank {} of {} started by the launcher ({}), rendezvous at {}:{}; {}{}",
                 detail("RANK", "0"), detail("WORLD_SIZE", "1"), c.source, detail("MASTER_ADDR", "127.0.0.1"),
                 detail("MASTER_PORT", std::to_string(settings.trainer.master_port)), counted(named.size(), "data worker"), named.empty() ? " (none named by --workers or --worker-service: local preprocessing only)" : "");
    return run_trainer(settings, named, host_name(co, "localhost"), &c);
  }
  const cluster::RolePlan plan = cluster::resolve_roles(c, co);
  spdlog::info("host {} of group {} ({}): role {} (from {})", c.current_host, c.current_group,
               c.current_instance_type, cluster::role_name(plan.role),
               plan.origin.count("role") ? plan.origin.at("role") : c.source);
  if (plan.role == cluster::Role::kWorker) {
    Settings s = settings;
    if (s.worker.port < 0) s.worker.port = cluster::worker_endpoint(c.current_host, co).port;
    if (!command.empty()) spdlog::info("{} runs on the trainer hosts; this one serves data", printable(command[0], 200));
    if (plan.trainer_hosts.empty()) return run_worker(s, c.current_host);
    return run_worker_host(s, c.current_host, cluster::worker_endpoint(plan.trainer_hosts.front(), co).address);
  }
  if (command.empty()) {
    training::require_builtin_trainer("a trainer host with no command to run (training --model " +
                                      settings.trainer.model + ")");
    check_gpu(c, settings.trainer);
  }
  std::vector<std::string> targets = named;
  if (!named.empty() && !plan.worker_hosts.empty()) {
    spdlog::info("data workers from --workers/--worker-service ({}), not from the worker groups", named.size());
  }
  if (named.empty()) targets = cluster::group_worker_targets(plan.worker_hosts, co);
  if (!command.empty()) return run_command(settings, c, plan, targets, command, given);
  const int procs = ranks_on_host(settings, c, true);
  training::check_ranks_fit_gpus(procs);
  // One rank on the only trainer host, with no worker hosts to hear from: no group to
  // start, this process is the rank.
  if (procs == 1 && plan.trainer_hosts.size() == 1 && plan.worker_hosts.empty()) {
    return run_trainer(settings, targets, c.current_host, &c);
  }
  return run_trainer_ranks(settings, c, plan, targets, forwarded, given, procs);
}

std::string host_name(const ClusterOptions& opts, const std::string& fallback) {
  if (!opts.current_host.empty()) return opts.current_host;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return fallback;
  return name;
}

}  // namespace tandem::launch
