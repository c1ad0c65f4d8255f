#include <unistd.h>

#include <filesystem>

#include <spdlog/spdlog.h>

#include "tandem/cluster/cluster.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/roles.h"
#include "tandem/common/error.h"
#include "tandem/common/signals.h"
#include "tandem/common/text.h"
#include "tandem/launch/process.h"
#include "tandem/launch/run.h"
#include "tandem/training/runtime.h"
#include "tandem/training/trainer.h"

namespace tandem::launch {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// One trainer process per GPU (or --procs-per-host), each a `tandem trainer` with
// torchrun's variables, supervised: if one dies the others are stopped.
int run_rank_processes(const Settings& settings, const cluster::RolePlan& plan, const std::vector<std::string>& targets,
                       const std::vector<std::string>& forwarded, int procs) {
  const ClusterOptions& c = settings.cluster;
  const std::string master_addr =
      cluster::resolve_host(cluster::worker_endpoint(plan.trainer_hosts.front(), c).address, c.resolve_timeout_s);
  const std::string my_addr = cluster::worker_endpoint(plan.trainer_hosts.at(plan.host_index), c).address;
  const int world = static_cast<int>(plan.trainer_hosts.size()) * procs;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe");
  std::vector<ProcessSpec> children;
  for (int local = 0; local < procs; ++local) {
    const int rank = plan.host_index * procs + local;
    ProcessSpec p;
    p.name = "rank-" + std::to_string(rank);
    p.argv = {exe, "trainer", "--sagemaker-root", c.sagemaker_root, "--current-host", plan.trainer_hosts.at(plan.host_index)};
    if (!c.config_file.empty()) p.argv.insert(p.argv.end(), {"--config", c.config_file});
    if (!targets.empty()) p.argv.insert(p.argv.end(), {"--workers", joined(targets)});
    p.argv.insert(p.argv.end(), forwarded.begin(), forwarded.end());
    p.env = {{"RANK", std::to_string(rank)},
             {"LOCAL_RANK", std::to_string(local)},
             {"WORLD_SIZE", std::to_string(world)},
             {"LOCAL_WORLD_SIZE", std::to_string(procs)},
             {"GROUP_RANK", std::to_string(plan.host_index)},
             {"MASTER_ADDR", master_addr},
             {"MASTER_PORT", std::to_string(settings.trainer.master_port)},
             {"TANDEM_GLOO_ADDRESS", cluster::resolve_host(my_addr, c.resolve_timeout_s)}};
    // The token reaches the ranks through the environment, never their command lines.
    if (!settings.security.token.empty()) p.env["TANDEM_TOKEN"] = settings.security.token;
    children.push_back(std::move(p));
  }
  spdlog::info("starting {} (ranks {}..{} of {}), rendezvous at {}:{}", counted(procs, "trainer process", "trainer processes"),
               plan.host_index * procs, plan.host_index * procs + procs - 1, world, master_addr,
               settings.trainer.master_port);
  unblock_stop_signals();  // supervise() forwards them to the ranks from a handler
  SuperviseOptions opts;
  opts.timeout_s = 1e9;  // training takes as long as it takes; SIGTERM and failures end it
  opts.grace_s = 100;    // SIGTERM -> SIGKILL: SageMaker allows 120 s, ranks need it for a checkpoint
  const std::vector<ExitStatus> statuses = supervise(children, opts);
  bool interrupted = false;
  for (const auto& s : statuses) {
    if (s.ok()) continue;
    if (s.signal == 0 && s.exit_code == kExitInterrupted) interrupted = true;
    else return kExitFailed;
  }
  return interrupted ? kExitInterrupted : kExitOk;
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

}  // namespace

int run_launch(const Settings& settings, const std::vector<std::string>& forwarded) {
  // The role's SignalWatcher takes SIGTERM later; threads started before it (CUDA's,
  // when the GPU check loads the runtime) must not take it instead and die of it.
  block_stop_signals();
  const cluster::Cluster c = cluster::discover(settings.cluster);
  const ClusterOptions& co = settings.cluster;
  const std::vector<std::string> named =
      cluster::explicit_worker_targets(settings.trainer.workers, settings.trainer.worker_service, co);
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
    return run_worker(s, c.current_host);
  }
  check_gpu(c, settings.trainer);
  std::vector<std::string> targets = named;
  if (!named.empty() && !plan.worker_hosts.empty()) {
    spdlog::info("data workers from --workers/--worker-service ({}), not from the worker groups", named.size());
  }
  if (named.empty()) targets = cluster::group_worker_targets(plan.worker_hosts, co);
  const int procs = settings.trainer.procs_per_host > 0 ? settings.trainer.procs_per_host
                                                        : std::max(training::cuda_device_count(), 1);
  training::check_ranks_fit_gpus(procs);
  if (procs == 1 && plan.trainer_hosts.size() == 1) return run_trainer(settings, targets, c.current_host, &c);
  return run_rank_processes(settings, plan, targets, forwarded, procs);
}

std::string host_name(const ClusterOptions& opts, const std::string& fallback) {
  if (!opts.current_host.empty()) return opts.current_host;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return fallback;
  return name;
}

}  // namespace tandem::launch
