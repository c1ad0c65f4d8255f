// torchrun's and Kubeflow PyTorchJob's variables: the launcher has already started this
// process as one rank, so tandem trains as that rank and takes its data workers from
// --workers. Nodes are known only by index: no host name is invented for dialing.
#include <algorithm>

#include "draft.h"

#include "tandem/common/launch_env.h"

namespace tandem::cluster::detail {
namespace {

constexpr const char* kWho = "torchrun";

// This node's index: GROUP_RANK, else RANK / LOCAL_WORLD_SIZE, else 0 for a single node.
std::pair<int, std::string> node_rank(const EnvLookup& env, int per_node, int nodes) {
  std::pair<int, std::string> rank{0, "default"};
  if (auto group_rank = get(env, "GROUP_RANK")) {
    rank = {env_int("GROUP_RANK", *group_rank, 0, kWho), "GROUP_RANK"};
  } else if (auto global_rank = get(env, "RANK")) {
    rank = {env_int("RANK", *global_rank, 0, kWho) / per_node, "RANK"};
  } else if (nodes > 1) {
    fail(env_where("GROUP_RANK"),
         "is not set, yet WORLD_SIZE/LOCAL_WORLD_SIZE make " + std::to_string(nodes) + " nodes",
         "set GROUP_RANK to this node's index (0.." + std::to_string(nodes - 1) + "), as torchrun does");
  }
  if (rank.first >= nodes) {
    fail(env_where(rank.second), "puts this node at index " + std::to_string(rank.first) + " of only " +
                                     std::to_string(nodes) + " nodes",
         "make WORLD_SIZE, LOCAL_WORLD_SIZE and " + rank.second + " agree");
  }
  return rank;
}

// Zero-padded so that sorting the names keeps node order. Labels, never dialed.
std::string node_name(int index, int nodes) {
  std::string digits = std::to_string(index);
  const size_t width = std::to_string(nodes - 1).size();
  return "node-" + std::string(width - std::min(width, digits.size()), '0') + digits;
}

}  // namespace

std::optional<Cluster> from_torchrun_env(const EnvLookup& env) {
  auto world = get(env, "WORLD_SIZE");
  if (!world) return std::nullopt;
  const int world_size = env_int("WORLD_SIZE", *world, 1, kWho);
  // Kubeflow's PyTorchJob sets WORLD_SIZE, RANK and MASTER_ADDR in each pod and no
  // LOCAL_WORLD_SIZE: one process per pod.
  auto local = get(env, "LOCAL_WORLD_SIZE");
  const int per_node = local ? env_int("LOCAL_WORLD_SIZE", *local, 1, kWho) : 1;
  if (world_size % per_node != 0) {
    fail(env_where("WORLD_SIZE"), *world + " is not a multiple of LOCAL_WORLD_SIZE=" + *local,
         "give every node the same number of processes");
  }
  const int nodes = world_size / per_node;
  const auto [rank, rank_origin] = node_rank(env, per_node, nodes);
  InstanceGroup group{kHomogeneousGroup, kUnknownType, {}};
  for (int i = 0; i < nodes; ++i) group.hosts.push_back(node_name(i, nodes));
  Cluster c;
  c.current_host = group.hosts[rank];
  c.current_group = group.name;
  c.current_instance_type = group.instance_type;
  c.hosts = group.hosts;
  c.groups = {group};
  c.ranks_started = true;
  c.platform = Platform::kTorchrun;
  c.source = local ? "torchrun environment (WORLD_SIZE, LOCAL_WORLD_SIZE)"
                   : "Kubeflow PyTorchJob environment (WORLD_SIZE, RANK; no LOCAL_WORLD_SIZE: one process per node)";
  c.origin["hosts"] = std::string(local ? "WORLD_SIZE/LOCAL_WORLD_SIZE" : "WORLD_SIZE (one process per node)") +
                      ": nodes are known by index only; the rendezvous is MASTER_ADDR";
  c.origin["current_host"] = rank_origin;
  for (const char* key : {"groups", "current_group", "current_instance_type"}) c.origin[key] = "default";
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                           "GROUP_RANK"}) {
    if (auto v = get(env, name)) c.details[name] = *v;
  }
  return c;
}

}  // namespace tandem::cluster::detail

namespace tandem::cluster {

LauncherEnv read_launcher_env(const EnvLookup& env) {
  using detail::env_int;
  using detail::get;
  LauncherEnv l;
  const auto integer = [&](const char* name, int fallback, int min) {
    const auto v = get(env, name);
    return v ? env_int(name, *v, min, "torchrun") : fallback;
  };
  RankPlace& p = l.place;
  p.world = integer("WORLD_SIZE", 1, 1);
  p.rank = integer("RANK", 0, 0);
  p.local_rank = integer("LOCAL_RANK", 0, 0);
  p.local_world = integer("LOCAL_WORLD_SIZE", 1, 1);
  l.master_port = integer("MASTER_PORT", 0, 1);
  if (l.master_port > 65535) {
    detail::fail(detail::env_where("MASTER_PORT"), "is " + std::to_string(l.master_port) + ", not a port",
                 "set a port from 1 to 65535");
  }
  l.master_addr = get(env, "MASTER_ADDR").value_or("");
  l.agent_store = get(env, "TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  if (l.agent_store) l.restart_count = integer("TORCHELASTIC_RESTART_COUNT", 0, 0);
  l.gloo_address = get(env, "TANDEM_GLOO_ADDRESS").value_or("");
  l.simulated_host = get(env, "TANDEM_SIMULATED_HOST").has_value();
  l.rank_group = get(env, launch_env::kRankGroup).value_or("") == "1";
  l.host = get(env, launch_env::kHost).value_or("");
  l.host_types = get(env, launch_env::kHostTypes).value_or("");
  l.stream_relay = get(env, "TANDEM_STREAM_RELAY").value_or("");
  if (p.rank >= p.world) {
    detail::fail(detail::env_where("RANK"), "is " + std::to_string(p.rank) + " of WORLD_SIZE=" +
                                                std::to_string(p.world),
                 "RANK must be below WORLD_SIZE: set both as torchrun does");
  }
  if (p.local_rank >= p.local_world || p.local_world > p.world) {
    detail::fail(detail::env_where("LOCAL_RANK"),
                 "is " + std::to_string(p.local_rank) + " of LOCAL_WORLD_SIZE=" + std::to_string(p.local_world) +
                     " in WORLD_SIZE=" + std::to_string(p.world),
                 "LOCAL_RANK must be below LOCAL_WORLD_SIZE, and LOCAL_WORLD_SIZE at most WORLD_SIZE");
  }
  return l;
}

}  // namespace tandem::cluster
