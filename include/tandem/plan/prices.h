// The price table `tandem plan` works from: SageMaker training instance types with their
// vCPUs, GPUs and on-demand dollars per hour, from a JSON file (tandem ships
// data/sagemaker-prices.json) and the user's overrides.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::plan {

struct InstanceType {
  std::string name;           // "ml.c5.18xlarge"
  int vcpus = 0;              // what a worker's pool uses: one thread per vCPU
  int gpus = 0;
  double usd_per_hour = 0.0;  // on-demand, for one instance; 0: not priced (a node type)
  std::string cpu;            // the processor the type runs on, "" when the file does not say
  double network_gbps = 0.0;  // sustained network bandwidth, gigabits/s; 0 when the file does not say
  // Spot: the fraction saved against on-demand, and the share of instances interrupted in
  // a month (the unit of AWS's Spot Instance Advisor); negative: the table's default.
  double spot_discount = -1.0;
  double spot_interruption_pct_month = -1.0;
};

// The table's spot defaults ("spot" in the file), for types that give none.
struct SpotDefaults {
  double discount = 0.65;
  double interruption_pct_month = 10.0;
  double provision_seconds = 300.0;  // from an interruption to a replacement instance running the container
};

struct PriceTable {
  std::string origin;     // the file it came from, or "built-in" for tables made in code
  std::string region;     // "us-east-1"
  std::string as_of;      // when the prices were taken, "2024-06"
  std::string currency = "USD";
  std::map<std::string, InstanceType> types;
  std::vector<std::string> overridden;  // types whose price came from --price
  SpotDefaults spot;
};

// A type's spot discount and interruptions per hour (its own, else the table's default).
double spot_discount(const PriceTable& table, const InstanceType& type);
double spot_interruptions_per_hour(const PriceTable& table, const InstanceType& type);
// A job's: the sum over its instances (one entry each), a type the table lacks at the
// table's default. A SageMaker job restarts whole when any one is interrupted.
double job_interruptions_per_hour(const PriceTable& table, const std::vector<std::string>& instances);

// Parses a price file's JSON:
//   {"region": ..., "as_of": ..., "instances": {"ml.c5.18xlarge": {"vcpus": 72, "gpus": 0,
//    "usd_per_hour": 3.672, "cpu": "...", "network_gbps": 25}, ...}}
// `origin` names the file in errors. usd_per_hour may be left out (a node type of another
// cluster: the plan then counts nodes). Throws ConfigError naming the entry and the fix
// for a missing or non-positive vcpus, or a usd_per_hour that is not more than 0.
PriceTable parse_price_table(const nlohmann::json& j, const std::string& origin);

// Reads and parses a price file. Throws ConfigError when it cannot be read or parsed.
PriceTable load_price_table(const std::string& path);

// Where tandem looks for its price file, in order, relative to `exe`'s folder (when
// empty: the file holding this code, the tandem binary or the library a Python script
// loaded): ../share/tandem/ (cmake install; the wheel's _bin/tandem), ../data/ (a build/
// folder inside the source tree), data/, share/tandem/ (the wheel's library), ../../../data/
// (a build's python/tandem/ library).
std::vector<std::string> default_price_file_candidates(const std::string& exe = "");

// The first existing default candidate, loaded. Throws ConfigError listing where it
// looked and the fix (--prices FILE) when there is none.
PriceTable load_default_price_table(const std::string& exe = "");

// Applies one "--price TYPE=DOLLARS" override: sets the type's hourly price, or adds the
// type when the table lacks it (then with 0 vCPUs: fine for a trainer type; a worker type
// needs vCPUs, so planning with it asks for a --prices file). Throws ConfigError for a
// malformed spec or a price that is not a positive number.
void apply_price_override(PriceTable& table, const std::string& spec);

// What the command-line flags ask for: `file` (--prices; the default price file when
// empty), then each "--price TYPE=DOLLARS" of `overrides` in order.
PriceTable load_prices(const std::string& file, const std::vector<std::string>& overrides);

// The type, or ConfigError naming it, the closest known names and the fix.
const InstanceType& find_instance_type(const PriceTable& table, const std::string& name);

}  // namespace tandem::plan
