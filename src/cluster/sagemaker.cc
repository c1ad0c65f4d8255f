// SageMaker's description of a job: input/config/resourceconfig.json, or the training
// toolkit's SM_* variables when the file is absent.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "draft.h"
#include "tandem/common/error.h"
#include "tandem/common/json_limits.h"
#include "tandem/common/text.h"

namespace tandem::cluster {
namespace detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- JSON reading -------------------------------------------------------------------

json parse_json(const std::string& text, const std::string& where) {
  if (json_depth(text) > kMaxJsonDepth) {
    fail(where, "nests arrays or objects more than " + std::to_string(kMaxJsonDepth) + " deep",
         "write the file SageMaker's way: an object of hosts and instance groups");
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail(where, "is not valid JSON (" + printable(e.what(), 300) + ")",
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
  c.platform = Platform::kSageMaker;
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

}  // namespace

std::optional<Cluster> from_resource_config_file(const std::string& root) {
  if (root.empty()) return std::nullopt;
  const fs::path file = fs::path(root) / "input" / "config" / "resourceconfig.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  return parse_resource_config(read_text(file), file.string());
}

namespace {

// ---- SageMaker training-toolkit variables -------------------------------------------

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

}  // namespace

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
  c.platform = Platform::kSageMaker;
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


}  // namespace detail

using namespace detail;

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

}  // namespace tandem::cluster
