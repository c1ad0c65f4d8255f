#include "tandem/plan/prices.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tandem/common/error.h"
#include "tandem/common/json_limits.h"
#include "tandem/common/text.h"

namespace tandem::plan {

namespace fs = std::filesystem;

namespace {

std::string string_or(const nlohmann::json& j, const char* key, const std::string& fallback) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// The number at `key` in [0, most], -1 when absent. Throws naming it otherwise.
double fraction_or(const nlohmann::json& e, const char* key, double most, const std::string& where) {
  const auto it = e.find(key);
  if (it == e.end()) return -1.0;
  if (!it->is_number() || !(it->get<double>() >= 0) || it->get<double>() > most) {
    throw ConfigError(where + " has a bad \"" + key + "\": a number from 0 to " + fmt::format("{}", most));
  }
  return it->get<double>();
}

SpotDefaults parse_spot(const nlohmann::json& j, const std::string& origin) {
  SpotDefaults d;
  const auto it = j.find("spot");
  if (it == j.end()) return d;
  if (!it->is_object()) throw ConfigError("\"spot\" in " + origin + " is not an object: see data/sagemaker-prices.json");
  const std::string where = "\"spot\" in " + origin;
  if (const double v = fraction_or(*it, "discount", 1.0, where); v >= 0) d.discount = v;
  if (const double v = fraction_or(*it, "interruption_pct_month", 100.0, where); v >= 0) d.interruption_pct_month = v;
  if (const double v = fraction_or(*it, "provision_seconds", 86400.0, where); v >= 0) d.provision_seconds = v;
  return d;
}

InstanceType parse_type(const std::string& name, const nlohmann::json& e, const std::string& origin) {
  const std::string where = "instance type '" + printable(name, 80) + "' in " + origin;
  if (!e.is_object()) throw ConfigError(where + " is not an object: write {\"vcpus\": 72, \"usd_per_hour\": 3.672}");
  InstanceType t;
  t.name = name;
  const auto vcpus = e.find("vcpus");
  if (vcpus == e.end() || !vcpus->is_number_integer() || vcpus->get<long long>() < 1 ||
      vcpus->get<long long>() > 100000) {
    throw ConfigError(where + " needs \"vcpus\": a whole number of at least 1");
  }
  t.vcpus = vcpus->get<int>();
  const auto gpus = e.find("gpus");
  if (gpus != e.end()) {
    if (!gpus->is_number_integer() || gpus->get<long long>() < 0 || gpus->get<long long>() > 1000) {
      throw ConfigError(where + " has a bad \"gpus\": write a whole number, 0 for a CPU type");
    }
    t.gpus = gpus->get<int>();
  }
  // Without a price the type is a node type (another cluster's): the plan counts nodes.
  if (const auto price = e.find("usd_per_hour"); price != e.end()) {
    if (!price->is_number() || !std::isfinite(price->get<double>()) || price->get<double>() <= 0) {
      throw ConfigError(where + " has a bad \"usd_per_hour\": the on-demand price of one instance-hour, more than 0 "
                                "(leave it out for a node type without a price)");
    }
    t.usd_per_hour = price->get<double>();
  }
  t.cpu = string_or(e, "cpu", "");
  t.spot_discount = fraction_or(e, "spot_discount", 1.0, where);
  t.spot_interruption_pct_month = fraction_or(e, "spot_interruption_pct_month", 100.0, where);
  if (const auto net = e.find("network_gbps"); net != e.end()) {
    if (!net->is_number() || !std::isfinite(net->get<double>()) || net->get<double>() <= 0) {
      throw ConfigError(where + " has a bad \"network_gbps\": the sustained bandwidth in gigabits/s, more than 0");
    }
    t.network_gbps = net->get<double>();
  }
  return t;
}

// The file holding this code: the tandem binary, or the library a Python script loaded
// (the wheel's tandem/libtandem_feed.so, a build's python/tandem/), whose process's
// executable is Python's.
std::string self_object() {
  Dl_info info{};
  std::error_code ec;
  if (dladdr(reinterpret_cast<void*>(&load_default_price_table), &info) != 0 && info.dli_fname) {
    const fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p.string();
  }
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

// Names sharing the family ("ml.c5" of "ml.c5.24xlarge"), else the first few names.
std::string suggestions(const PriceTable& table, const std::string& name) {
  const std::string family = name.substr(0, name.rfind('.') == std::string::npos ? name.size() : name.rfind('.'));
  std::vector<std::string> near;
  for (const auto& [known, _] : table.types) {
    if (!family.empty() && known.rfind(family + ".", 0) == 0) near.push_back(known);
  }
  if (near.empty()) {
    for (const auto& [known, _] : table.types) {
      if (near.size() == 6) break;
      near.push_back(known);
    }
  }
  std::string out;
  for (const std::string& n : near) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

PriceTable parse_price_table(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw ConfigError(origin + " must hold a JSON object with \"instances\": see data/sagemaker-prices.json");
  const auto instances = j.find("instances");
  if (instances == j.end() || !instances->is_object() || instances->empty()) {
    throw ConfigError(origin + " has no \"instances\" object: write {\"instances\": {\"ml.c5.18xlarge\": "
                               "{\"vcpus\": 72, \"usd_per_hour\": 3.672}, ...}}");
  }
  PriceTable t;
  t.origin = origin;
  t.region = string_or(j, "region", "unknown region");
  t.as_of = string_or(j, "as_of", "unknown date");
  t.currency = string_or(j, "currency", "USD");
  for (const auto& [name, entry] : instances->items()) t.types.emplace(name, parse_type(name, entry, origin));
  t.spot = parse_spot(j, origin);
  return t;
}

double job_interruptions_per_hour(const PriceTable& table, const std::vector<std::string>& instances) {
  double sum = 0;
  for (const std::string& name : instances) {
    const auto it = table.types.find(name);
    sum += spot_interruptions_per_hour(table, it != table.types.end() ? it->second : InstanceType{});
  }
  return sum;
}

double spot_discount(const PriceTable& table, const InstanceType& type) {
  return type.spot_discount >= 0 ? type.spot_discount : table.spot.discount;
}

double spot_interruptions_per_hour(const PriceTable& table, const InstanceType& type) {
  const double pct = type.spot_interruption_pct_month >= 0 ? type.spot_interruption_pct_month
                                                           : table.spot.interruption_pct_month;
  // A month is 730 hours; a share p interrupted in it is a rate of -ln(1 - p) per month.
  return pct >= 100 ? 1.0 : -std::log1p(-pct / 100.0) / 730.0;
}

PriceTable load_price_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read price file " + path + ": check the path (--prices FILE)");
  std::stringstream text;
  text << in.rdbuf();
  if (json_depth(text.str()) > kMaxJsonDepth) throw ConfigError("price file " + path + " nests too deep to be a price table");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("price file " + path + " is not valid JSON (" + printable(e.what(), 300) + "): fix its syntax");
  }
  return parse_price_table(j, path);
}

std::vector<std::string> default_price_file_candidates(const std::string& exe) {
  const std::string self = exe.empty() ? self_object() : exe;
  if (self.empty()) return {};
  const fs::path dir = fs::path(self).parent_path();
  std::vector<std::string> out;
  for (const char* place : {"../share/tandem", "../data", "data", "share/tandem", "../../../data"}) {
    out.push_back((dir / place / "sagemaker-prices.json").lexically_normal().string());
  }
  return out;
}

PriceTable load_default_price_table(const std::string& exe) {
  const std::vector<std::string> candidates = default_price_file_candidates(exe);
  std::string looked;
  for (const std::string& c : candidates) {
    if (fs::is_regular_file(c)) return load_price_table(c);
    looked += (looked.empty() ? "" : ", ") + c;
  }
  throw ConfigError("no price file found (looked in " + (looked.empty() ? std::string("no place: the executable's path is unknown") : looked) +
                    "): install tandem with `cmake --install`, or pass --prices FILE "
                    "(the source tree's data/sagemaker-prices.json)");
}

void apply_price_override(PriceTable& table, const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    throw ConfigError("--price '" + printable(spec, 80) + "' is not TYPE=DOLLARS: write e.g. --price ml.c5.18xlarge=3.672");
  }
  const std::string name = spec.substr(0, eq), value = spec.substr(eq + 1);
  double price = 0.0;
  size_t used = 0;
  try {
    price = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || !std::isfinite(price) || price <= 0 || price > 1e6) {
    throw ConfigError("--price " + printable(spec, 80) + ": '" + printable(value, 40) +
                      "' is not a price: give dollars per instance-hour, more than 0, e.g. 3.672");
  }
  auto it = table.types.find(name);
  if (it == table.types.end()) {
    InstanceType t;
    t.name = name;
    it = table.types.emplace(name, t).first;
  }
  it->second.usd_per_hour = price;
  table.overridden.push_back(name);
}

PriceTable load_prices(const std::string& file, const std::vector<std::string>& overrides) {
  PriceTable table = file.empty() ? load_default_price_table() : load_price_table(file);
  for (const std::string& spec : overrides) apply_price_override(table, spec);
  return table;
}

const InstanceType& find_instance_type(const PriceTable& table, const std::string& name) {
  const auto it = table.types.find(name);
  if (it != table.types.end()) return it->second;
  throw ConfigError("unknown instance type '" + printable(name, 80) + "': " + table.origin + " has no price for it (" +
                    suggestions(table, name) + " are known). Check the spelling, or give its price with --price " +
                    printable(name, 80) + "=DOLLARS (a worker type also needs its vCPUs: add it to a --prices file)");
}

}  // namespace tandem::plan
