// A pool's job's data settings (`tandem worker --pool-jobs`, a job's "settings"): the
// pool's data options with the job's applied through the same options the flags use.
#include <algorithm>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tandem/cli/options.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::cli {
namespace {

std::vector<std::string> words(const std::string& name, const nlohmann::json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  if (v.is_array() && name == "pipeline") return {v.dump()};  // a JSON list of steps, as --pipeline takes it
  if (v.is_array()) {
    std::vector<std::string> out;
    for (const auto& e : v) out.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    return out;
  }
  return {v.dump()};
}

}  // namespace

DataOptions pool_job_data(const DataOptions& base, const std::string& settings) {
  const nlohmann::json j = nlohmann::json::parse(settings, nullptr, false);
  if (!j.is_object()) throw ConfigError("a pool job's settings are not a JSON object: " + printable(settings, 200));
  DataOptions d = base;
  CLI::App app;
  add_data_options(app, d);
  std::vector<std::string> args;
  for (const auto& [key, value] : j.items()) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    if (!app.get_option_no_throw("--" + name)) {
      throw ConfigError("a pool job's setting '" + printable(key, 80) + "' is not a data setting (data, pipeline, "
                        "image-size, seed, ...: docs/configuration.md): a job's settings say what its samples are");
    }
    args.push_back("--" + name);
    for (std::string& w : words(name, value)) args.push_back(std::move(w));
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw ConfigError("a pool job's settings " + printable(settings, 200) + ": " + e.what());
  }
  return d;
}

}  // namespace tandem::cli
