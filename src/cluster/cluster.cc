// Cluster discovery. Each source (resourceconfig.json, SM_* variables) is read into a
// Draft and checked by one `assemble`, so every source fails the same way with a message
// that names where the bad value lives.
#include "tandem/common/json_limits.h"
#include "tandem/common/text.h"
#include "tandem/cluster/cluster.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "tandem/common/error.h"

namespace tandem::cluster {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kHomogeneousGroup = "homogeneousCluster";
constexpr const char* kUnknownType = "unknown";

// What one source said, before any checking.
struct Draft {
  std::string current_host;
  std::optional<std::string> current_group;
  std::optional<std::string> current_instance_type;
  std::vector<std::string> hosts;
  std::vector<InstanceGroup> groups;  // empty: the source names no groups (homogeneous)
  std::string network_interface;
};

// How error messages name each field of a source.
struct Labels {
  std::string current_host, hosts, groups, current_group, instance_type;
  std::vector<std::string> group;  // one per Draft::groups entry
};

[[noreturn]] void fail(const std::string& where, const std::string& problem,
                       const std::string& fix) {
  throw ConfigError(where + ": " + problem + ". Fix: " + fix);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "(none)" : out;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

std::vector<std::string> group_names(const std::vector<InstanceGroup>& groups) {
  std::vector<std::string> names;
  for (const auto& g : groups) names.push_back(g.name);
  return names;
}

// ---- JSON reading -------------------------------------------------------------------

json parse_json(const std::string& text, const std::string& where) {
  if (json_depth(text) > kMaxJsonDepth) {
    fail(where, "nests arrays or objects more than " + std::to_string(kMaxJsonDepth) + " deep",
         "write the file SageMaker's way: an object of hosts and instance groups");
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(where, std::string("is not valid JSON (") + e.what() + ")",
         "correct the JSON syntax at that position");
  }
}

// Absent and null mean the same: the source did not say.
const json* member(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

const json& required(const json& obj, const std::string& key, const std::string& where) {
  const json* value = member(obj, key);
  if (value == nullptr) fail(where, "is missing", "add the field \"" + key + "\"");
  return *value;
}

// Names end up in messages, logs and host lookups: a control character (a NUL cuts a
// message short, an escape sequence rewrites a terminal) is refused.
std::string printable_name(std::string s, const std::string& where) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      fail(where, "holds a control character ('" + printable(s, 60) + "', position " + std::to_string(i) + ")",
           "use plain names, like SageMaker's algo-1 or ml.c5.18xlarge");
    }
  }
  return s;
}

std::string as_string(const json& value, const std::string& where) {
  if (!value.is_string()) {
    fail(where, std::string("expected a string, got ") + value.type_name(),
         "write it as a JSON string, e.g. \"algo-1\"");
  }
  return printable_name(value.get<std::string>(), where);
}

std::vector<std::string> as_strings(const json& value, const std::string& where) {
  const std::string fix = "write it as a JSON list of strings, e.g. [\"algo-1\", \"algo-2\"]";
  if (!value.is_array()) {
    fail(where, std::string("expected a list of host names, got ") + value.type_name(), fix);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) {
      fail(where, "item " + std::to_string(i) + " is a " + value[i].type_name() + ", not a string",
           fix);
    }
    out.push_back(printable_name(value[i].get<std::string>(), where));
  }
  return out;
}

std::optional<std::string> optional_string(const json& obj, const std::string& key,
                                           const std::string& where) {
  const json* value = member(obj, key);
  if (value == nullptr) return std::nullopt;
  return as_string(*value, where);
}

// ---- Checks shared by every source --------------------------------------------------

void check_host_list(const std::vector<std::string>& hosts, const std::string& where) {
  if (hosts.empty()) fail(where, "lists no hosts", "list every host of the job");
  std::set<std::string> seen;
  for (const auto& host : hosts) {
    if (host.empty()) fail(where, "contains an empty host name", "remove it");
    if (!seen.insert(host).second) {
      fail(where, "lists host " + host + " twice", "list each host once");
    }
  }
}

void check_groups(const std::vector<InstanceGroup>& groups, const Labels& labels) {
  std::map<std::string, std::string> owner;  // host -> group
  std::set<std::string> names;
  for (size_t i = 0; i < groups.size(); ++i) {
    const InstanceGroup& g = groups[i];
    if (g.name.empty()) fail(labels.group[i], "has an empty group name", "give the group a name");
    if (!names.insert(g.name).second) {
      fail(labels.groups, "lists group " + g.name + " twice", "list each instance group once");
    }
    if (g.instance_type.empty()) {
      fail(labels.group[i], "has an empty instance type", "set the group's instance type");
    }
    if (g.hosts.empty()) {
      fail(labels.group[i], "group " + g.name + " has no hosts",
           "list at least one host in it, or remove the group");
    }
    check_host_list(g.hosts, labels.group[i]);
    for (const auto& host : g.hosts) {
      auto [it, fresh] = owner.emplace(host, g.name);
      if (!fresh) {
        fail(labels.groups, "host " + host + " is in both " + it->second + " and " + g.name,
             "list each host in exactly one instance group");
      }
    }
  }
}

// "data_group [algo-3, algo-1], dnn_group [algo-2]", for messages.
std::string group_listing(const std::vector<InstanceGroup>& groups) {
  std::vector<std::string> listing;
  for (const auto& g : groups) listing.push_back(g.name + " [" + join(g.hosts) + "]");
  return join(listing);
}

const InstanceGroup& group_of_current_host(const Draft& d, const Labels& labels) {
  for (const auto& g : d.groups) {
    if (contains(g.hosts, d.current_host)) return g;
  }
  fail(labels.current_host,
       "current host " + d.current_host + " is in no instance group (" +
           group_listing(d.groups) + ")",
       "set it to a host of one group, or pass --current-host with one of them");
}

void check_current_group(const Draft& d, const InstanceGroup& own, const Labels& labels) {
  if (d.current_group && *d.current_group != own.name) {
    const auto names = group_names(d.groups);
    if (!contains(names, *d.current_group)) {
      fail(labels.current_group,
           "\"" + *d.current_group + "\" is not an instance group (the groups are " +
               join(names) + ")",
           "set it to the group of the current host, " + own.name);
    }
    fail(labels.current_group,
         "is " + *d.current_group + " but current host " + d.current_host + " is in " + own.name,
         "make the current group and the current host agree");
  }
  if (d.current_instance_type && *d.current_instance_type != own.instance_type) {
    fail(labels.instance_type,
         "is " + *d.current_instance_type + " but group " + own.name + " has instance type " +
             own.instance_type,
         "make the current instance type and the group's instance type agree");
  }
}

void check_coverage(const Draft& d, const Labels& labels) {
  std::set<std::string> grouped;
  for (const auto& g : d.groups) {
    for (const auto& host : g.hosts) {
      grouped.insert(host);
      if (!contains(d.hosts, host)) {
        fail(labels.hosts, "does not list " + host + ", which group " + g.name + " lists",
             "add " + host + " to the job's hosts, or remove it from " + g.name);
      }
    }
  }
  for (const auto& host : d.hosts) {
    if (!grouped.count(host)) {
      fail(labels.hosts,
           "lists " + host + ", which is in no instance group (" + group_listing(d.groups) + ")",
           "add " + host + " to one group's hosts, or remove it from the job's hosts");
    }
  }
}

// Checks a draft and turns it into a sorted Cluster. A draft without groups is a
// homogeneous job: one group holding every host.
Cluster assemble(Draft d, Labels labels) {
  check_host_list(d.hosts, labels.hosts);
  if (d.groups.empty()) {
    d.groups.push_back({d.current_group.value_or(kHomogeneousGroup),
                        d.current_instance_type.value_or(kUnknownType), d.hosts});
    labels.group.push_back(labels.hosts);
  }
  check_groups(d.groups, labels);
  const InstanceGroup& own = group_of_current_host(d, labels);
  check_current_group(d, own, labels);
  check_coverage(d, labels);

  Cluster c;
  c.current_host = d.current_host;
  c.current_group = own.name;
  c.current_instance_type = own.instance_type;
  c.hosts = std::move(d.hosts);
  c.groups = std::move(d.groups);
  c.network_interface = d.network_interface;
  std::sort(c.hosts.begin(), c.hosts.end());
  for (auto& g : c.groups) std::sort(g.hosts.begin(), g.hosts.end());
  std::sort(c.groups.begin(), c.groups.end(),
            [](const InstanceGroup& a, const InstanceGroup& b) { return a.name < b.name; });
  return c;
}

// ---- resourceconfig.json ------------------------------------------------------------

void read_file_groups(const json& groups, const std::string& path, Draft& d, Labels& labels) {
  if (!groups.is_array() || groups.empty()) {
    fail(labels.groups, std::string("expected a non-empty list of instance groups, got ") +
                            (groups.is_array() ? "an empty list" : groups.type_name()),
         "list the groups as [{\"instance_group_name\": ..., \"instance_type\": ..., \"hosts\": "
         "[...]}], or drop the field for a homogeneous cluster");
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string at = "instance_groups[" + std::to_string(i) + "]";
    const std::string where = path + ", field \"" + at + "\"";
    auto field = [&](const std::string& key) { return path + ", field \"" + at + "." + key + "\""; };
    const json& g = groups[i];
    if (!g.is_object()) {
      fail(where, std::string("expected an object, got ") + g.type_name(),
           "write each group as {\"instance_group_name\": ..., \"instance_type\": ..., "
           "\"hosts\": [...]}");
    }
    InstanceGroup group;
    group.name = as_string(required(g, "instance_group_name", field("instance_group_name")),
                           field("instance_group_name"));
    group.instance_type =
        as_string(required(g, "instance_type", field("instance_type")), field("instance_type"));
    group.hosts = as_strings(required(g, "hosts", field("hosts")), field("hosts"));
    d.groups.push_back(std::move(group));
    labels.group.push_back(where);
  }
}

Labels file_labels(const std::string& path) {
  auto field = [&](const std::string& key) { return path + ", field \"" + key + "\""; };
  return {field("current_host"), field("hosts"), field("instance_groups"),
          field("current_group_name"), field("current_instance_type"), {}};
}

void set_file_origin(Cluster& c, const Draft& d, const std::string& path) {
  const bool had_groups = !d.groups.empty();
  c.source = path;
  for (const char* key : {"current_host", "hosts", "groups"}) c.origin[key] = path;
  c.origin["current_group"] = d.current_group || had_groups ? path : "default";
  c.origin["current_instance_type"] = d.current_instance_type || had_groups ? path : "default";
  if (!c.network_interface.empty()) c.origin["network_interface"] = path;
}

std::string read_text(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    fail(path.string(), "exists but is not a regular file",
         "replace it with SageMaker's resourceconfig.json, or remove it");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) {
    fail(path.string(), "cannot be read", "check its permissions, or point --sagemaker-root elsewhere");
  }
  return text.str();
}

// ---- SageMaker training-toolkit variables -------------------------------------------

// An empty variable is treated as unset, as shells make `export X=` easy.
std::optional<std::string> get(const EnvLookup& env, const std::string& name) {
  auto value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::string env_where(const std::string& name) { return "environment variable " + name; }

void read_env_groups(const std::string& text, Draft& d, Labels& labels) {
  const std::string where = env_where("SM_INSTANCE_GROUPS_DICT");
  const json doc = parse_json(text, where);
  if (!doc.is_object() || doc.empty()) {
    fail(where, std::string("expected a non-empty JSON object of groups, got ") +
                    (doc.is_object() ? "an empty object" : doc.type_name()),
         "write it as {\"<group>\": {\"instance_group_name\": \"<group>\", \"instance_type\": "
         "..., \"hosts\": [...]}, ...}");
  }
  for (const auto& [name, g] : doc.items()) {
    const std::string at = where + ", group \"" + name + "\"";
    auto field = [&](const std::string& key) { return at + ", field \"" + key + "\""; };
    if (!g.is_object()) {
      fail(at, std::string("expected an object, got ") + g.type_name(),
           "write it as {\"instance_group_name\": ..., \"instance_type\": ..., \"hosts\": [...]}");
    }
    auto given_name = optional_string(g, "instance_group_name", field("instance_group_name"));
    if (given_name && *given_name != name) {
      fail(field("instance_group_name"), "is " + *given_name + ", not its key " + name,
           "make the group's name and its key agree");
    }
    InstanceGroup group{name, as_string(required(g, "instance_type", field("instance_type")),
                                        field("instance_type")),
                        as_strings(required(g, "hosts", field("hosts")), field("hosts"))};
    d.groups.push_back(std::move(group));
    labels.group.push_back(at);
  }
}

// SM_INSTANCE_GROUPS repeats the group names; a disagreement means a broken environment.
void check_env_group_names(const EnvLookup& env, const Draft& d) {
  auto listed = get(env, "SM_INSTANCE_GROUPS");
  if (!listed) return;
  const std::string where = env_where("SM_INSTANCE_GROUPS");
  auto names = as_strings(parse_json(*listed, where), where);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (d.groups.empty()) {
    if (names.size() > 1) {
      fail(env_where("SM_INSTANCE_GROUPS_DICT"),
           "is not set although SM_INSTANCE_GROUPS lists " + join(names),
           "set SM_INSTANCE_GROUPS_DICT, or provide input/config/resourceconfig.json");
    }
    return;
  }
  auto keys = group_names(d.groups);
  std::sort(keys.begin(), keys.end());
  if (names != keys) {
    fail(where, "lists " + join(names) + " but SM_INSTANCE_GROUPS_DICT has " + join(keys),
         "make SM_INSTANCE_GROUPS and SM_INSTANCE_GROUPS_DICT name the same groups");
  }
}

Draft read_sagemaker_env(const EnvLookup& env, Labels& labels) {
  auto current = get(env, "SM_CURRENT_HOST");
  auto hosts = get(env, "SM_HOSTS");
  if (!current) {
    fail(env_where("SM_CURRENT_HOST"), "is not set although other SM_* host variables are",
         "set it to this host's name, e.g. algo-1");
  }
  if (!hosts) {
    fail(env_where("SM_HOSTS"), "is not set although SM_CURRENT_HOST is",
         "set it to the job's hosts as a JSON list, e.g. [\"algo-1\", \"algo-2\"]");
  }
  Draft d;
  d.current_host = *current;
  d.hosts = as_strings(parse_json(*hosts, labels.hosts), labels.hosts);
  d.current_group = get(env, "SM_CURRENT_INSTANCE_GROUP");
  d.current_instance_type = get(env, "SM_CURRENT_INSTANCE_TYPE");
  d.network_interface = get(env, "SM_NETWORK_INTERFACE_NAME").value_or("");
  if (auto dict = get(env, "SM_INSTANCE_GROUPS_DICT")) read_env_groups(*dict, d, labels);
  check_env_group_names(env, d);
  return d;
}

std::optional<Cluster> from_sagemaker_env(const EnvLookup& env) {
  if (!get(env, "SM_CURRENT_HOST") && !get(env, "SM_HOSTS") &&
      !get(env, "SM_INSTANCE_GROUPS_DICT")) {
    return std::nullopt;
  }
  Labels labels{env_where("SM_CURRENT_HOST"), env_where("SM_HOSTS"),
                env_where("SM_INSTANCE_GROUPS_DICT"), env_where("SM_CURRENT_INSTANCE_GROUP"),
                env_where("SM_CURRENT_INSTANCE_TYPE"), {}};
  Draft d = read_sagemaker_env(env, labels);
  const bool had_groups = !d.groups.empty();
  Cluster c = assemble(d, labels);
  c.source = "SageMaker environment (SM_* variables)";
  c.origin["current_host"] = "SM_CURRENT_HOST";
  c.origin["hosts"] = "SM_HOSTS";
  c.origin["groups"] = had_groups ? "SM_INSTANCE_GROUPS_DICT" : "SM_HOSTS";
  c.origin["current_group"] = d.current_group  ? "SM_CURRENT_INSTANCE_GROUP"
                              : had_groups     ? "SM_INSTANCE_GROUPS_DICT"
                                               : "default";
  c.origin["current_instance_type"] = d.current_instance_type ? "SM_CURRENT_INSTANCE_TYPE"
                                      : had_groups ? "SM_INSTANCE_GROUPS_DICT"
                                                   : "default";
  if (!c.network_interface.empty()) c.origin["network_interface"] = "SM_NETWORK_INTERFACE_NAME";
  return c;
}

// ---- torchrun variables -------------------------------------------------------------

int env_int(const std::string& name, const std::string& text, int min) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min) {
    fail(env_where(name), "is \"" + text + "\", not an integer >= " + std::to_string(min),
         "set it to an integer >= " + std::to_string(min) + " (torchrun sets it for you)");
  }
  return value;
}

// This node's index: GROUP_RANK, else RANK / LOCAL_WORLD_SIZE, else 0 for a single node.
std::pair<int, std::string> node_rank(const EnvLookup& env, int per_node, int nodes) {
  std::pair<int, std::string> rank{0, "default"};
  if (auto group_rank = get(env, "GROUP_RANK")) {
    rank = {env_int("GROUP_RANK", *group_rank, 0), "GROUP_RANK"};
  } else if (auto global_rank = get(env, "RANK")) {
    rank = {env_int("RANK", *global_rank, 0) / per_node, "RANK"};
  } else if (nodes > 1) {
    fail(env_where("GROUP_RANK"),
         "is not set, yet WORLD_SIZE/LOCAL_WORLD_SIZE make " + std::to_string(nodes) + " nodes",
         "set GROUP_RANK to this node's index (0.." + std::to_string(nodes - 1) +
             "), as torchrun does");
  }
  if (rank.first >= nodes) {
    fail(env_where(rank.second), "puts this node at index " + std::to_string(rank.first) +
                                     " of only " + std::to_string(nodes) + " nodes",
         "make WORLD_SIZE, LOCAL_WORLD_SIZE and " + rank.second + " agree");
  }
  return rank;
}

// Zero-padded so that sorting the names keeps node order.
std::string node_name(int index, int nodes) {
  std::string digits = std::to_string(index);
  const size_t width = std::to_string(nodes - 1).size();
  return "node-" + std::string(width - std::min(width, digits.size()), '0') + digits;
}

std::optional<Cluster> from_torchrun_env(const EnvLookup& env) {
  auto world = get(env, "WORLD_SIZE");
  if (!world) return std::nullopt;
  const int world_size = env_int("WORLD_SIZE", *world, 1);
  // Kubeflow's PyTorchJob sets WORLD_SIZE, RANK and MASTER_ADDR in each pod and no
  // LOCAL_WORLD_SIZE: one process per pod.
  auto local = get(env, "LOCAL_WORLD_SIZE");
  const int per_node = local ? env_int("LOCAL_WORLD_SIZE", *local, 1) : 1;
  if (world_size % per_node != 0) {
    fail(env_where("WORLD_SIZE"),
         *world + " is not a multiple of LOCAL_WORLD_SIZE=" + *local,
         "give every node the same number of processes");
  }
  const int nodes = world_size / per_node;
  const auto [rank, rank_origin] = node_rank(env, per_node, nodes);
  InstanceGroup group{kHomogeneousGroup, kUnknownType, {}};
  for (int i = 0; i < nodes; ++i) group.hosts.push_back(node_name(i, nodes));
  Cluster c{group.hosts[rank], group.name, group.instance_type, group.hosts, {group}, "", "", {}};
  c.source = local ? "torchrun environment (WORLD_SIZE, LOCAL_WORLD_SIZE)"
                   : "Kubeflow PyTorchJob environment (WORLD_SIZE, RANK; no LOCAL_WORLD_SIZE: one process per node)";
  const auto master = get(env, "MASTER_ADDR");
  c.origin["hosts"] = std::string(local ? "WORLD_SIZE/LOCAL_WORLD_SIZE" : "WORLD_SIZE (one process per node)") +
                      (master ? " (node-0 is MASTER_ADDR=" + *master + ")" : std::string());
  c.origin["current_host"] = rank_origin;
  for (const char* key : {"groups", "current_group", "current_instance_type"}) {
    c.origin[key] = "default";
  }
  return c;
}

// ---- Fallback and flags -------------------------------------------------------------

Cluster local_cluster() {
  InstanceGroup group{"local", "local", {"localhost"}};
  Cluster c{"localhost", group.name, group.instance_type, group.hosts, {group}, "", "", {}};
  c.source = "default (no resourceconfig.json, SM_* or torchrun variables: one local host)";
  for (const char* key : {"current_host", "hosts", "groups", "current_group",
                          "current_instance_type"}) {
    c.origin[key] = "default";
  }
  return c;
}

void apply_current_host(Cluster& c, const std::string& host) {
  if (host.empty()) return;
  for (const auto& g : c.groups) {
    if (!contains(g.hosts, host)) continue;
    c.current_host = host;
    c.current_group = g.name;
    c.current_instance_type = g.instance_type;
    for (const char* key : {"current_host", "current_group", "current_instance_type"}) {
      c.origin[key] = "--current-host";
    }
    return;
  }
  fail("--current-host " + host,
       "is not a host of this job (hosts: " + join(c.hosts) + "; from " + c.source + ")",
       "pass one of those hosts, or drop --current-host");
}

Cluster discover_sources(const std::string& root, const EnvLookup& env) {
  if (!root.empty()) {
    const fs::path file = fs::path(root) / "input" / "config" / "resourceconfig.json";
    std::error_code ec;
    if (fs::exists(file, ec)) return parse_resource_config(read_text(file), file.string());
  }
  if (auto c = from_sagemaker_env(env)) return *c;
  if (auto c = from_torchrun_env(env)) return *c;
  return local_cluster();
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

Cluster parse_resource_config(const std::string& json_text, const std::string& path) {
  const json doc = parse_json(json_text, path);
  if (!doc.is_object()) {
    fail(path, std::string("expected a JSON object, got ") + doc.type_name(),
         "use SageMaker's resourceconfig.json format: {\"current_host\": ..., \"hosts\": [...], "
         "...}");
  }
  Labels labels = file_labels(path);
  Draft d;
  d.current_host = as_string(required(doc, "current_host", labels.current_host),
                             labels.current_host);
  d.hosts = as_strings(required(doc, "hosts", labels.hosts), labels.hosts);
  d.current_group = optional_string(doc, "current_group_name", labels.current_group);
  d.current_instance_type = optional_string(doc, "current_instance_type", labels.instance_type);
  const std::string nic = path + ", field \"network_interface_name\"";
  d.network_interface = optional_string(doc, "network_interface_name", nic).value_or("");
  if (const json* groups = member(doc, "instance_groups")) {
    read_file_groups(*groups, path, d, labels);
  }
  Cluster c = assemble(d, labels);
  set_file_origin(c, d, path);
  return c;
}

Cluster discover(const ClusterOptions& opts, const EnvLookup& env) {
  Cluster c = discover_sources(opts.sagemaker_root, env);
  apply_current_host(c, opts.current_host);
  return c;
}

}  // namespace tandem::cluster
