#include <utility>

#include <nlohmann/json.hpp>

#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/common/error.h"
#include "tandem/launch/run.h"

namespace tandem::cli {
namespace {

// A `script` that is set but empty would run tandem's own trainer instead of the user's.
void check_script_given(const CLI::App& app, const LaunchOptions& o) {
  if (app.get_option("--script")->count() > 0 && o.script.empty()) {
    throw ConfigError("script is given but empty: name your training script (e.g. \"script\": \"train.py\" in "
                      "hyperparameters.json, or --script train.py), or leave it out to run tandem's own trainer");
  }
}

}  // namespace

Command add_launch_command(CLI::App& root, Settings& s, const std::string& name) {
  const std::string about =
      name == "train" ? "Same as `launch`: SageMaker starts a bring-your-own container as `docker run IMAGE train`"
                      : "Discover the cluster, resolve this host's role (trainer or data worker) and run it";
  CLI::App* app = root.add_subcommand(name, about);
  add_host_options(*app, s);
  add_launch_options(*app, s.launch);
  app->add_flag("--role-only", s.launch.role_only,
                "Print this host's role (trainer or worker, its group and the workers a trainer dials) as one JSON "
                "line and exit 0, running nothing: what tandem.serve() asks first")
      ->group(kLaunchGroup);
  return {app, [app, &s, &root] {
            // The ranks are `tandem trainer`s: the settings of other roles (a worker's
            // --idle-timeout, --claim-timeout...) are this launcher's, not theirs.
            const CLI::App* trainer = nullptr;
            for (const CLI::App* sub : std::as_const(root).get_subcommands(
                     [](const CLI::App* a) { return a->get_name() == "trainer"; })) {
              trainer = sub;
            }
            std::vector<std::string> forwarded;
            auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
            const nlohmann::json given = given_settings(*app);  // items() must not outlive it
            check_script_given(*app, s.launch);
            for (const auto& [name, value] : given.items()) {
              if (trainer && !trainer->get_option_no_throw("--" + name)) continue;
              if (value.is_array()) {
                for (const auto& v : value) forwarded.push_back("--" + name + "=" + text(v));
              } else {
                forwarded.push_back("--" + name + "=" + text(value));
              }
            }
            return launch::run_launch(s, forwarded, given.dump());
          },
          true, true};
}

}  // namespace tandem::cli
