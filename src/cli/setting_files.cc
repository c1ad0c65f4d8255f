// Settings from files (--config, SageMaker's hyperparameters.json) and what was given.
#include "tandem/cli/options.h"
#include "flag_checks.h"

#include "tandem/transport/credentials.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "tandem/common/environment.h"
#include "tandem/common/error.h"
#include "tandem/common/json_limits.h"
#include "tandem/common/python_literal.h"
#include "tandem/common/text.h"


namespace tandem::cli {

namespace {

std::string normalize(std::string key) {
  for (char& c : key) if (c == '_') c = '-';
  return key;
}

// Every setting name any tandem command accepts from a file.
const std::set<std::string>& known_settings() {
  static const std::set<std::string> names = [] {
    CLI::App app;
    Settings s;
    add_cluster_options(app, s.cluster);
    add_data_options(app, s.data);
    add_worker_options(app, s.worker);
    add_trainer_options(app, s.trainer);
    add_security_options(app, s.security);
    add_launch_options(app, s.launch);
    std::set<std::string> out;
    for (const CLI::Option* o : app.get_options()) {
      if (!o->get_lnames().empty()) out.insert(o->get_lnames().front());
    }
    return out;
  }();
  return names;
}

nlohmann::json read_json_object(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read " + path + ": check the path and its permissions");
  std::stringstream text;
  text << in.rdbuf();
  if (json_depth(text.str()) > kMaxJsonDepth) {
    throw ConfigError(path + " nests arrays or objects more than " + std::to_string(kMaxJsonDepth) +
                      " deep: settings are a flat object, like {\"batch-size\": 64}");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + " is not valid JSON (" + printable(e.what(), 300) + "): fix the file's syntax");
  }
  if (!j.is_object()) throw ConfigError(path + " must hold a JSON object of settings, like {\"batch-size\": 64}");
  return j;
}

// A hyperparameter written as a list or an object, bracket to bracket.
bool bracketed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r\n"), last = s.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) return false;
  const std::string_view t = std::string_view(s).substr(first, last - first + 1);
  return t.size() >= 2 && ((t.front() == '[' && t.back() == ']') || (t.front() == '{' && t.back() == '}') ||
                           (t.front() == '(' && t.back() == ')'));
}

// SageMaker passes every hyperparameter as a string: JSON-encoded by the framework
// estimators ("\"abc\"", "64", "[\"--epochs\", \"90\"]"), or str() of the value by the
// generic Estimator ("['--epochs', '90']", "{'root': '/opt/ml'}"). Both forms are read.
std::vector<std::string> values_of(const nlohmann::json& v, bool from_sagemaker, const std::string& key,
                                   const std::string& path) {
  if (v.is_array()) {
    std::vector<std::string> out;
    for (const auto& e : v) out.push_back(e.is_string() ? e.get<std::string>() : e.dump());
    return out;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (from_sagemaker) {
      nlohmann::json decoded =
          json_depth(s) > kMaxJsonDepth ? nlohmann::json(nlohmann::json::value_t::discarded)
                                          : nlohmann::json::parse(s, nullptr, false);
      if (decoded.is_discarded() && bracketed(s)) {
        std::optional<nlohmann::json> literal = parse_python_literal(s);
        if (!literal) {
          throw ConfigError("'" + printable(key, 80) + "' in " + path + " looks like a list or an object but is " +
                            "neither JSON nor a Python literal: " + printable(s, 120) + ": write it as JSON " +
                            "([\"--epochs\", \"90\"] or {\"root\": \"/data\"}), or as the SDK's str() of a " +
                            "list or dict (['--epochs', '90'] or {'root': '/data'})");
        }
        decoded = std::move(*literal);
      }
      if (decoded.is_object()) return {decoded.dump()};
      if (!decoded.is_discarded() && (decoded.is_string() || decoded.is_array())) {
        return values_of(decoded, false, key, path);
      }
    }
    return {s};
  }
  return {v.dump()};
}

// "unknown setting 'batch_sise' in FILE: did you mean 'batch_size'?", spelled as the file
// spells keys: `name` is the key without its tandem- prefix, which the guess keeps
// ('tandem-io-thread': did you mean 'tandem-io-threads'?).
std::string unknown_setting(const std::string& key, const std::string& name, const std::string& path) {
  std::vector<std::string> names(known_settings().begin(), known_settings().end());
  const bool underscores = key.find('_') != std::string::npos;
  std::string guess = nearest(name, names, std::max<size_t>(1, name.size() / 3));
  if (!guess.empty()) guess = key.substr(0, key.size() - name.size()) + guess;
  if (underscores) std::replace(guess.begin(), guess.end(), '-', '_');
  return "unknown setting '" + printable(key, 80) + "' in " + path +
         (guess.empty() ? "" : ": did you mean '" + guess + "'?") + " (`tandem launch --help` lists the settings)";
}

// A list given where one value belongs, for a setting whose one value may be a JSON list
// (--pipeline '["decode", "hflip"]'): that list as one JSON text; nullopt for any other.
std::optional<std::string> as_json_list(const std::string& name, const nlohmann::json& value, bool from_sagemaker) {
  if (!takes_json_list(name)) return std::nullopt;
  nlohmann::json list = value;
  if (value.is_string() && from_sagemaker) {
    const std::string s = value.get<std::string>();
    list = json_depth(s) > kMaxJsonDepth ? nlohmann::json() : nlohmann::json::parse(s, nullptr, false);
    if (list.is_discarded() && bracketed(s)) list = parse_python_literal(s).value_or(nlohmann::json());
  }
  if (!list.is_array()) return std::nullopt;
  return list.dump();
}

// Which settings files set which setting: name -> "'key' in FILE", for messages.
using FileOrigins = std::map<std::string, std::string>;

// SageMaker's hyperparameters.json belongs to the user's script when tandem.serve() runs
// tandem from it (TANDEM_SCRIPT_HYPERPARAMETERS=1): then only tandem- (or tandem_) keys
// are tandem's, and the rest are left to the script, named once in the log.
bool script_owns_hyperparameters() {
  const std::string v = process_env("TANDEM_SCRIPT_HYPERPARAMETERS").value_or("");
  return !v.empty() && v != "0";
}

// A key of hyperparameters.json with its tandem- prefix taken off ("tandem_image_size" ->
// "image-size"); nullopt for the script's own key (only under script_owns_hyperparameters).
std::optional<std::string> tandem_key(const std::string& key, bool script_owned) {
  const std::string n = normalize(key);
  if (n.rfind("tandem-", 0) == 0 && n.size() > 7) return n.substr(7);
  if (script_owned) return std::nullopt;
  return n;
}

void apply_file(CLI::App& cmd, const std::string& path, bool from_sagemaker, FileOrigins& set_by_file,
                std::vector<std::string>* command) {
  const nlohmann::json settings = read_json_object(path);
  const bool script_owned = from_sagemaker && script_owns_hyperparameters();
  std::vector<std::string> left;  // the script's keys
  for (const auto& [key, value] : settings.items()) {
    if (from_sagemaker && key.rfind("sagemaker_", 0) == 0) continue;  // the toolkit's own keys
    const std::optional<std::string> stripped = from_sagemaker ? tandem_key(key, script_owned) : normalize(key);
    if (!stripped) {
      left.push_back(printable(key, 80));
      continue;
    }
    const std::string name = *stripped;
    if (name == "config" || name == "sagemaker-root") {
      throw ConfigError("'" + printable(key, 80) + "' in " + path + " cannot be set from a file: pass --" + name + " as a flag");
    }
    if (!known_settings().count(name)) throw ConfigError(unknown_setting(key, name, path));
    CLI::Option* opt = cmd.get_option_no_throw("--" + name);
    if (!opt) continue;  // a setting for another role
    if (opt->count() > 0 && !set_by_file.count(name)) continue;  // a flag wins
    const std::optional<std::string> list = as_json_list(name, value, from_sagemaker);
    const std::vector<std::string> values = list ? std::vector<std::string>{*list}
                                                 : values_of(value, from_sagemaker, key, path);
    const bool listed = !list && (value.is_array() || values.size() != 1);
    if (listed && opt->get_expected_max() <= 1) {
      throw ConfigError("'" + printable(key, 80) + "' in " + path + " takes one value, not a list of " +
                        std::to_string(values.size()) + ": write it as a single value");
    }
    opt->clear();
    for (const std::string& v : values) opt->add_result(v);
    try {
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw ConfigError("bad value for '" + printable(key, 80) + "' in " + path + ": " + one_line(e.what()));
    }
    // CLI11 2.1 splits a word like "[a,b]" as it takes it; the program's words stay whole.
    if (name == "command" && command) *command = values;
    set_by_file[name] = "'" + printable(key, 80) + "' in " + path;
  }
  if (!left.empty()) {
    spdlog::info("{}: {} left to your script (under tandem.serve() tandem reads only its tandem- keys there)", path,
                 fmt::format("{}", fmt::join(left, ", ")));
  }
}

// "--steps" or "'steps' in FILE": where a setting's value came from.
std::string origin_of(const CLI::Option& opt, const FileOrigins& set_by_file) {
  const auto it = set_by_file.find(opt.get_lnames().front());
  return it != set_by_file.end() ? it->second : "--" + opt.get_lnames().front();
}

}  // namespace

void apply_setting_files(CLI::App& cmd, const ClusterOptions& opts, std::vector<std::string>* command) {
  FileOrigins set_by_file;
  if (!opts.config_file.empty()) apply_file(cmd, opts.config_file, false, set_by_file, command);
  const std::string hp = opts.sagemaker_root + "/input/config/hyperparameters.json";
  if (std::filesystem::exists(hp)) apply_file(cmd, hp, true, set_by_file, command);
  const CLI::Option* steps = cmd.get_option_no_throw("--steps");
  const CLI::Option* epochs = cmd.get_option_no_throw("--epochs");
  if (steps && epochs && steps->count() > 0 && epochs->count() > 0) {
    throw ConfigError("both steps and epochs are set (" + origin_of(*steps, set_by_file) + ", " +
                      origin_of(*epochs, set_by_file) + "): give one of them");
  }
}

void finish_settings(Settings& s, bool is_rank, const cluster::EnvLookup& env) {
  s.data.sagemaker_root = s.cluster.sagemaker_root;  // channels live under it
  if (is_rank) s.launcher = cluster::read_launcher_env(env);
  const auto set = [&](const char* name) -> std::string {
    const auto v = env(name);
    return v ? *v : "";
  };
  if (s.security.token.empty() && s.security.token_file.empty()) {
    if (const auto env_token = env("TANDEM_TOKEN")) {
      if (env_token->empty()) throw ConfigError(transport::empty_token_error("TANDEM_TOKEN"));
      s.security.token = *env_token;
    } else {
      s.security.token_file = transport::token_channel(s.cluster.sagemaker_root);
    }
  }
  const std::string quiet = set("TANDEM_QUIET");
  if (!quiet.empty() && quiet != "0") s.quiet = true;
  for (const char* var : {"TRAINING_JOB_NAME", "SLURM_JOB_ID"}) {
    if (s.security.job.empty()) s.security.job = set(var);
  }
  transport::resolve_security(s.security);
}

bool takes_json_list(const std::string& name) { return name == "pipeline"; }

std::vector<std::pair<std::string, std::vector<std::string>>> script_hyperparameters(const std::string& sagemaker_root) {
  const std::string path = sagemaker_root + "/input/config/hyperparameters.json";
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  const nlohmann::json file = read_json_object(path);  // kept: items() views it
  for (const auto& [key, value] : file.items()) {
    const std::optional<std::string> name = tandem_key(key, /*script_owned=*/true);
    if (!name) continue;
    const std::optional<std::string> list = as_json_list(*name, value, true);
    out.emplace_back(*name, list ? std::vector<std::string>{*list} : values_of(value, true, key, path));
  }
  return out;
}

nlohmann::json given_settings(const CLI::App& cmd) {
  nlohmann::json out = nlohmann::json::object();
  for (const CLI::Option* o : cmd.get_options()) {
    const std::string& g = o->get_group();
    if (g != kDataGroup && g != kWorkerGroup && g != kTrainerGroup && g != kSecurityGroup) continue;
    if (o->count() == 0 || o->get_lnames().empty()) continue;
    // The token travels in the environment (TANDEM_TOKEN), never on command lines or in
    // files tandem writes.
    if (o->get_lnames().front() == "token") continue;
    const auto& results = o->results();
    if (results.empty()) continue;
    if (o->get_expected_max() > 1) out[o->get_lnames().front()] = results;
    else out[o->get_lnames().front()] = results.back();
  }
  return out;
}

}  // namespace tandem::cli
