// Internal to discovery: the checks every source goes through (src/cluster/draft.h).
#include "draft.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::cluster::detail {

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

// Names end up in messages, logs and host lookups: a control character (a NUL cuts a
// message short, an escape sequence rewrites a terminal), bytes that are not UTF-8, and a
// name longer than a DNS name may be are refused, so every later message quotes it whole.
std::string printable_name(std::string s, const std::string& where) {
  const std::string fix = "use plain names, like SageMaker's algo-1 or ml.c5.18xlarge";
  if (s.size() > kMaxNameBytes) {
    fail(where, "is " + std::to_string(s.size()) + " bytes long ('" + printable(s, 60) + "'), more than the " +
                    std::to_string(kMaxNameBytes) + " a name may have",
         fix);
  }
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      fail(where, "holds a control character ('" + printable(s, 60) + "', position " + std::to_string(i) + ")", fix);
    }
  }
  if (!valid_utf8(s)) fail(where, "holds a byte that is not UTF-8 ('" + printable(s, 60) + "')", fix);
  return s;
}

std::optional<std::string> get(const EnvLookup& env, const std::string& name) {
  auto value = env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::string env_where(const std::string& name) { return "environment variable " + name; }

int env_int(const std::string& name, const std::string& text, int min, const std::string& who) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min) {
    fail(env_where(name), "is \"" + printable(text, 60) + "\", not an integer >= " + std::to_string(min),
         "set it to an integer >= " + std::to_string(min) + " (" + who + " sets it for you)");
  }
  return value;
}

namespace {

// ---- Checks shared by every source --------------------------------------------------

// Every name any source gave, whichever way it read it, before a message quotes one.
void check_names(const Draft& d, const Labels& labels) {
  printable_name(d.current_host, labels.current_host);
  if (d.current_group) printable_name(*d.current_group, labels.current_group);
  if (d.current_instance_type) printable_name(*d.current_instance_type, labels.instance_type);
  for (const auto& host : d.hosts) printable_name(host, labels.hosts);
  for (size_t i = 0; i < d.groups.size(); ++i) {
    const std::string& where = i < labels.group.size() ? labels.group[i] : labels.groups;
    printable_name(d.groups[i].name, where);
    printable_name(d.groups[i].instance_type, where);
    for (const auto& host : d.groups[i].hosts) printable_name(host, where);
  }
}

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

void check_groups(const std::vector<InstanceGroup>& groups, const Labels& labels, bool shared_hosts) {
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
      if (!fresh && !shared_hosts) {
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
    if (d.shared_hosts && d.current_group && g.name != *d.current_group) continue;
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

}  // namespace

// Checks a draft and turns it into a sorted Cluster. A draft without groups is a
// homogeneous job: one group holding every host.
Cluster assemble(Draft d, Labels labels) {
  check_names(d, labels);
  check_host_list(d.hosts, labels.hosts);
  if (d.groups.empty()) {
    d.groups.push_back({d.current_group.value_or(kHomogeneousGroup),
                        d.current_instance_type.value_or(kUnknownType), d.hosts});
    labels.group.push_back(labels.hosts);
  }
  check_groups(d.groups, labels, d.shared_hosts);
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


}  // namespace tandem::cluster::detail
