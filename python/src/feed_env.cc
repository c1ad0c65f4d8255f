#include "feed_env.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/cli/options.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/roles.h"
#include "tandem/common/error.h"
#include "tandem/common/launch_env.h"
#include "tandem/common/text.h"
#include "tandem/feed/run_summary.h"

namespace tandem::python {
namespace {

std::string underscored(std::string key) {
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::string joined(const std::vector<std::string>& targets) {
  std::string out;
  for (const std::string& t : targets) out += (out.empty() ? "" : ",") + t;
  return out;
}

std::vector<std::string> split_targets(const std::string& all) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= all.size();) {
    const size_t comma = std::min(all.find(',', start), all.size());
    if (comma > start) out.push_back(all.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// One TANDEM_SETTINGS value as a Setting: a string, or a list of strings.
Setting setting_of(const std::string& key, const nlohmann::json& value) {
  Setting s{key, {}};
  const auto bad = [&] {
    return ConfigError(std::string(launch_env::kSettings) + "'s '" + printable(key, 80) +
                       "' is not a string or a list of strings: the launcher writes them so; unset it or fix it");
  };
  if (value.is_string()) return {key, {value.get<std::string>()}};
  if (!value.is_array()) throw bad();
  for (const auto& v : value) {
    if (!v.is_string()) throw bad();
    s.values.push_back(v.get<std::string>());
  }
  return s;
}

std::vector<Setting> launcher_settings() {
  std::vector<Setting> out;
  const std::string text = cluster::process_env(launch_env::kSettings).value_or("");
  if (!text.empty()) {
    const nlohmann::json all = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!all.is_object()) {
      throw ConfigError(std::string("$") + launch_env::kSettings + " is not a JSON object of settings (" +
                        printable(text, 80) + "): tandem launch writes it; unset it or fix it");
    }
    const std::vector<std::string> accepted = feed_setting_names();
    for (const auto& [key, value] : all.items()) {
      const std::string name = underscored(key);
      if (std::binary_search(accepted.begin(), accepted.end(), name)) out.push_back(setting_of(name, value));
    }
  }
  if (const auto job = cluster::process_env(launch_env::kJobName); job && !job->empty()) out.push_back({"job_name", {*job}});
  return out;
}

std::string place_of(const cluster::Cluster& c) {
  return "host " + c.current_host + (c.current_group.empty() ? "" : " of group " + c.current_group) + ", from " +
         c.source;
}

// The worker groups' addresses of the discovered cluster, and this host's place among
// the trainer hosts.
void discover_workers(FeedPlace& p, const Settings& settings, bool want_workers) {
  p.cluster = cluster::discover(settings.cluster);
  if (p.cluster.ranks_started) return;  // torchrun's variables: no groups to read
  const cluster::RolePlan plan = cluster::resolve_roles(p.cluster, settings.cluster);
  if (plan.role == cluster::Role::kWorker) {
    throw ConfigError("this is a data worker host (" + place_of(p.cluster) +
                      "): run the training script on the trainer group's hosts, and `tandem launch` here");
  }
  if (want_workers && !plan.worker_hosts.empty()) {
    p.workers = cluster::group_worker_targets(plan.worker_hosts, settings.cluster);
    p.workers_from = "the worker groups of " + p.cluster.source;
  }
  if (!cluster::process_env(launch_env::kWorldSize)) {
    p.rank = plan.host_index;
    p.world = static_cast<int>(std::max<size_t>(plan.trainer_hosts.size(), 1));
  }
}

[[noreturn]] void no_workers(const FeedPlace& p) {
  if (p.launched) {
    throw ConfigError(std::string("tandem launch found no data workers for this job ($") + launch_env::kWorkers +
                      " is empty): give the feed local_threads=N to make batches here, or run the job with a worker "
                      "group");
  }
  throw ConfigError(std::string("no data workers for this feed: workers= was not given, $") + launch_env::kWorkers +
                    " is not set (tandem launch sets it) and the cluster found (" +
                    (p.cluster.source.empty() ? "none" : place_of(p.cluster)) +
                    ") has no data worker group: pass workers=[\"host:port\", ...], start the script with "
                    "`tandem launch -- python SCRIPT`, or give local_threads=N to make batches here");
}

// The tandem- keys of the SageMaker host's hyperparameters.json that a feed takes (those
// of the workers or of tandem's own trainer are theirs): the script writes its data
// settings once, for tandem.serve() and tandem.Feed alike.
std::vector<Setting> hyperparameter_settings(const std::vector<Setting>& given) {
  std::string root = cluster::process_env(launch_env::kSageMakerRoot).value_or(ClusterOptions{}.sagemaker_root);
  for (const Setting& g : given) {
    if (underscored(g.key) == "sagemaker_root" && g.values.size() == 1) root = g.values.front();
  }
  const std::vector<std::string> accepted = feed_setting_names();
  std::vector<Setting> out;
  std::vector<std::string> taken;
  for (auto& [name, values] : cli::script_hyperparameters(root)) {
    const std::string key = underscored(name);
    if (!std::binary_search(accepted.begin(), accepted.end(), key)) continue;
    taken.push_back(key);
    out.push_back({key, std::move(values)});
  }
  static std::atomic<bool> said{false};  // once a process: every feed (each epoch's) reads the same file
  if (!taken.empty() && !said.exchange(true)) {
    spdlog::info("{}/input/config/hyperparameters.json gives this feed {}", root, fmt::format("{}", fmt::join(taken, ", ")));
  }
  return out;
}

}  // namespace

std::vector<Setting> with_launcher_settings(std::vector<Setting> given) {
  std::vector<Setting> out;
  std::vector<Setting> inherited = launcher_settings();
  for (Setting& s : hyperparameter_settings(given)) {
    const bool launched = std::any_of(inherited.begin(), inherited.end(), [&](const Setting& l) { return l.key == s.key; });
    if (!launched) inherited.push_back(std::move(s));
  }
  for (Setting& s : inherited) {
    const bool overridden = std::any_of(given.begin(), given.end(), [&](const Setting& g) {
      return underscored(g.key) == s.key;
    });
    if (!overridden) out.push_back(std::move(s));
  }
  out.insert(out.end(), std::make_move_iterator(given.begin()), std::make_move_iterator(given.end()));
  return out;
}

FeedPlace feed_place(const std::optional<std::vector<std::string>>& workers, std::optional<int> rank,
                     std::optional<int> world, const Settings& settings, bool need_workers) {
  FeedPlace p;
  const LauncherEnv env = cluster::read_launcher_env();
  p.rank = env.place.rank;
  p.world = env.place.world;
  p.local_world = env.place.local_world;
  p.simulated = env.simulated_host;
  p.relay = env.stream_relay;
  p.launch = cluster::process_env(launch_env::kLaunchId).value_or("");
  const auto launched = cluster::process_env(launch_env::kWorkers);
  p.launched = launched.has_value();
  if (workers) {
    p.workers = *workers;
  } else if (launched) {
    p.workers = split_targets(*launched);
    p.workers_from = std::string("$") + launch_env::kWorkers + " (tandem launch)";
  }
  if (p.launched) {
    p.cluster = cluster::cluster_for_plan(settings.cluster, env, /*launched=*/true);
  } else {
    // Finding nothing is no error for a feed that has its workers or makes its own batches.
    try {
      discover_workers(p, settings, !workers.has_value());
    } catch (const ConfigError& e) {
      if (workers || !need_workers) spdlog::debug("no cluster for the plan: {}", e.what());
      else throw;
    }
  }
  if (rank) p.rank = *rank;
  if (world) p.world = *world;
  if (p.workers.empty() && need_workers) no_workers(p);
  if (!p.workers_from.empty()) {
    spdlog::info("data workers from {}: {}", p.workers_from, printable(joined(p.workers), 300));
  }
  return p;
}

}  // namespace tandem::python
