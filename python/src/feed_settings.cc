#include "feed_settings.h"

#include <algorithm>
#include <set>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "tandem/cli/options.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"

namespace tandem::python {
namespace {

// The trainer's settings that shape the feed rather than the training loop.
// log-every and summary-json: the run's records (metrics.jsonl, summary.json), as the trainer's.
// emulate-step-ms: the script's steps, between two batches (bench/plan_sweep.sh --script).
const std::set<std::string> kFeedTrainerSettings = {"batch-size",    "steps",         "inflight",
                                                    "prefetch",      "connect-timeout", "batch-timeout",
                                                    "log-every",     "summary-json",  "emulate-step-ms",
                                                    "workers-watch", "worker-service"};

std::string dashed(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

std::string underscored(std::string key) {
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

// Every option tandem's commands register, with the structs they write to.
struct Registry {
  CLI::App app;
  Settings settings;
  Registry() {
    cli::add_cluster_options(app, settings.cluster);
    cli::add_security_options(app, settings.security);
    cli::add_data_options(app, settings.data);
    cli::add_trainer_options(app, settings.trainer);
    cli::add_worker_options(app, settings.worker);
  }
};

bool accepted(const CLI::Option& o) {
  const std::string& name = o.get_lnames().front();
  const std::string& g = o.get_group();
  return g == cli::kDataGroup || g == cli::kSecurityGroup || name == "sagemaker-root" || name == "metrics-port" ||
         name == "metrics-bind" || kFeedTrainerSettings.count(name) > 0;
}

// Why `key` is refused, and what to do instead.
std::string refusal(const std::string& key, const CLI::Option* known) {
  const std::string shown = "'" + printable(key, 80) + "'";
  if (known && known->get_group() == cli::kWorkerGroup) {
    return shown + " is a data worker's setting: pass --" + dashed(key) + " to `tandem worker`, not to tandem.Feed";
  }
  if (known) {
    return shown + " is a setting of tandem's own trainer or launcher, which tandem.Feed does not run: drop it "
           "(your script trains; see docs/python.md for the feed's settings)";
  }
  const std::string best = nearest(underscored(key), feed_setting_names(), 3);
  std::string out = "unknown setting " + shown + " for tandem.Feed";
  if (!best.empty()) return out + ": did you mean '" + best + "'?";
  std::string all;
  for (const std::string& name : feed_setting_names()) all += (all.empty() ? "" : ", ") + name;
  return out + "; the settings are " + all + " (docs/python.md)";
}

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ",") + v;
  return out;
}

}  // namespace

std::vector<std::string> feed_setting_names() {
  static const std::vector<std::string> names = [] {
    Registry r;
    std::vector<std::string> out;
    for (const CLI::Option* o : r.app.get_options()) {
      if (!o->get_lnames().empty() && accepted(*o)) out.push_back(underscored(o->get_lnames().front()));
    }
    std::sort(out.begin(), out.end());
    return out;
  }();
  return names;
}

Settings feed_settings(const std::vector<Setting>& given) {
  Registry r;
  std::vector<std::string> no_args;
  r.app.parse(no_args);  // defaults and environment variables (TANDEM_SAGEMAKER_ROOT)
  for (const Setting& s : given) {
    CLI::Option* opt = r.app.get_option_no_throw("--" + dashed(s.key));
    if (!opt || opt->get_lnames().empty() || !accepted(*opt)) throw ConfigError(refusal(s.key, opt));
    std::vector<std::string> values = s.values;
    if (values.size() != 1 && opt->get_expected_max() <= 1 && cli::takes_json_list(dashed(s.key))) {
      values = {nlohmann::json(s.values).dump()};  // pipeline=["decode", "hflip"]: one JSON list
    }
    if (values.size() != 1 && opt->get_expected_max() <= 1) {
      throw ConfigError("'" + printable(s.key, 80) + "' takes one value, not a list of " + std::to_string(s.values.size()) +
                        ": pass a single value");
    }
    opt->clear();
    for (const std::string& v : values) opt->add_result(v);
    try {
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw ConfigError("bad value for " + printable(s.key, 80) + "=" + printable(joined(s.values), 80) + ": " +
                        one_line(e.what()));
    }
  }
  cli::finish_settings(r.settings);
  return r.settings;
}

}  // namespace tandem::python
