#include <iostream>

#include <spdlog/spdlog.h>

#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/common/error.h"
#include "tandem/launch/roles.h"
#include "tandem/report/summary.h"
#include "tandem/transport/credentials.h"
#include "tandem/training/runtime.h"

namespace tandem::cli {

int run_cli(int argc, char** argv) {
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  CLI::App app{"tandem: one binary for every host of a heterogeneous training job.\n"
               "CPU hosts serve augmented batches over gRPC; GPU hosts train on them."};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return "tandem 0.1.0; " + training::describe(training::torch_runtime()); });
  Settings settings;
  std::vector<Command> commands = {
      add_launch_command(app, settings, "launch"), add_launch_command(app, settings, "train"),
      add_worker_command(app, settings),           add_trainer_command(app, settings),
      add_simulate_command(app, settings),         add_inspect_command(app, settings),
      add_bench_command(app, settings),            add_plan_command(app, settings),
      add_report_command(app, settings)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (Command& cmd : commands) {
    if (!cmd.app->parsed()) continue;
    try {
      apply_setting_files(*cmd.app, settings.cluster);
      settings.data.sagemaker_root = settings.cluster.sagemaker_root;  // channels live under it
      transport::resolve_security(settings.security);
      return cmd.run();
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      if (cmd.reports_failure) report::write_failure(settings.cluster.sagemaker_root, e.what());
      return launch::kExitFailed;
    }
  }
  return launch::kExitFailed;
}

}  // namespace tandem::cli
