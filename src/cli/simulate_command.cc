#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/common/error.h"
#include "tandem/launch/simulate.h"
#include "tandem/training/runtime.h"

namespace tandem::cli {

Command add_simulate_command(CLI::App& root, Settings& s) {
  CLI::App* app = root.add_subcommand(
      "simulate", "Run a whole heterogeneous cluster on this machine, one process per host");
  add_simulate_options(*app, s.simulate);
  app->add_option("--config", s.cluster.config_file, "JSON file of settings for every host")
      ->check(CLI::ExistingFile)->group(kClusterGroup);
  add_data_options(*app, s.data);
  add_worker_options(*app, s.worker);
  add_trainer_options(*app, s.trainer);
  add_security_options(*app, s.security);
  add_launch_options(*app, s.launch);
  return {app, [app, &s] {
            if (s.simulate.every_host && s.launch.command.empty() && s.launch.script.empty()) {
              throw ConfigError("--every-host runs your command on every host: give it after -- (e.g. tandem "
                                "simulate --every-host -- python3 train.py, a script that calls tandem.serve())");
            }
            if (s.launch.command.empty() && s.launch.script.empty() && s.cluster.config_file.empty()) {
              training::require_builtin_trainer("tandem simulate without -- COMMAND or --script (its trainer hosts "
                                                "would train --model " + s.trainer.model + ")");
            }
            nlohmann::json hyperparameters = given_settings(*app);
            // The command reaches every host as SageMaker would give it: in hyperparameters.json.
            for (const CLI::Option* o : app->get_options()) {
              if (o->get_group() != kLaunchGroup || o->count() == 0) continue;
              const std::string name = o->get_lnames().front();
              hyperparameters[name] = o->get_expected_max() > 1 ? nlohmann::json(o->results()) : nlohmann::json(o->results().back());
              if (name == "command") hyperparameters[name] = s.launch.command;  // word for word (CLI11 splits "[a,b]")
            }
            hyperparameters.erase("summary-json");  // simulate copies the summary itself
            // (run_simulate gives the trainers' rendezvous its own free port.)
            // The simulated GPU-family hosts are make-believe: they train on whatever this
            // machine has, so the GPU check that guards real GPU hosts is lifted.
            hyperparameters["allow-cpu-training"] = "true";
            spdlog::info("simulated trainer hosts train on this machine's {} (--allow-cpu-training)",
                         training::why_no_gpu(training::torch_runtime()).empty() ? "GPUs" : "CPU");
            return launch::run_simulate(s, hyperparameters, std::filesystem::read_symlink("/proc/self/exe"));
          },
          false};
}

}  // namespace tandem::cli
