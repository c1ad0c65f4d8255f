#include <cstdlib>
#include <iostream>
#include <set>

#include <spdlog/spdlog.h>

#include "tandem/cli/commands.h"
#include "help_format.h"
#include "usage_error.h"
#include "tandem/cli/options.h"
#include "tandem/common/environment.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/launch/run.h"
#include "tandem/report/summary.h"
#include "tandem/training/runtime.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/grpc_runtime.h"

namespace tandem::cli {
namespace {

// --log-level and --quiet, for this process and (through the environment) the ones it
// starts; false when TANDEM_LOG_LEVEL names no level.
bool set_output(std::string log_level, bool quiet, Settings& settings) {
  static const std::set<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
  if (!kLevels.count(log_level)) {
    spdlog::error("TANDEM_LOG_LEVEL is '{}': use trace, debug, info, warn or error", printable(log_level, 40));
    return false;
  }
  if (quiet) {
    log_level = "warn";
    settings.quiet = true;
    ::setenv("TANDEM_QUIET", "1", 1);  // for the processes this one starts
  }
  ::setenv("TANDEM_LOG_LEVEL", log_level.c_str(), 1);
  spdlog::set_level(spdlog::level::from_str(log_level));
  return true;
}

// Which ports the command was given, by a flag or a settings file (ClusterOptions).
void note_ports_given(const CLI::App& cmd, ClusterOptions& c) {
  const auto given = [&cmd](const char* flag) {
    const CLI::Option* o = cmd.get_option_no_throw(flag);
    return o != nullptr && o->count() > 0;
  };
  c.worker_port_given = given("--worker-port");
  c.master_port_given = given("--master-port");
}

}  // namespace

int run_cli(int argc, char** argv) {
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  CLI::App app{"tandem: one binary for every host of a heterogeneous training job.\n"
               "CPU hosts serve augmented batches over gRPC; GPU hosts train on them."};
  app.formatter(help_formatter());
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return "tandem 0.1.0; " + training::describe(training::torch_runtime()); });
  // Output settings, given before or after the command; they reach the processes tandem
  // starts (launch's ranks, simulate's hosts) through the environment.
  std::string log_level = process_env("TANDEM_LOG_LEVEL").value_or("info");
  bool quiet = false;
  app.add_option("--log-level", log_level, "trace | debug | info | warn | error (TANDEM_LOG_LEVEL)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->group("Output");
  app.add_flag("--quiet", quiet, "Warnings and errors only, no status line (TANDEM_QUIET=1)")->group("Output");
  app.fallthrough();
  Settings settings;
  std::vector<Command> commands = {
      add_launch_command(app, settings, "launch"), add_launch_command(app, settings, "train"),
      add_worker_command(app, settings),           add_trainer_command(app, settings),
      add_simulate_command(app, settings),         add_inspect_command(app, settings),
      add_bench_command(app, settings),            add_plan_command(app, settings),
      add_report_command(app, settings),           add_index_command(app, settings)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "tandem: " << usage_message(app, e, argc, argv) << std::endl;
    return kExitUsage;
  }
  if (const std::string problem = separator_problem(app, argc, argv); !problem.empty()) {
    std::cerr << "tandem: " << problem << std::endl;
    return kExitUsage;
  }
  if (auto words = words_after_separator(app, argc, argv)) settings.launch.command = std::move(*words);
  if (!set_output(log_level, quiet, settings)) return kExitConfig;
  transport::route_grpc_logs();
  for (Command& cmd : commands) {
    if (!cmd.app->parsed()) continue;
    try {
      apply_setting_files(*cmd.app, settings.cluster, &settings.launch.command);
      note_ports_given(*cmd.app, settings.cluster);
      finish_settings(settings, cmd.is_rank);
      return cmd.run();
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      if (cmd.reports_failure) report::write_failure(settings.cluster.sagemaker_root, settings.cluster.current_host, e.what());
      return exit_code(e);
    }
  }
  return kExitFailed;
}

}  // namespace tandem::cli
