// One function per subcommand, each in its own file under src/cli/.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "tandem/launch/settings.h"

namespace tandem::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // returns the exit code; runs after settings files are applied
  bool reports_failure = false;  // write errors to <root>/output/failure (SageMaker reads it)
  bool is_rank = false;  // may run as a training rank: reads torchrun's variables (Settings::launcher)
};

Command add_launch_command(CLI::App& root, Settings& s, const std::string& name);
Command add_worker_command(CLI::App& root, Settings& s);
Command add_trainer_command(CLI::App& root, Settings& s);
Command add_simulate_command(CLI::App& root, Settings& s);
Command add_inspect_command(CLI::App& root, Settings& s);
Command add_bench_command(CLI::App& root, Settings& s);
Command add_plan_command(CLI::App& root, Settings& s);
Command add_report_command(CLI::App& root, Settings& s);
Command add_index_command(CLI::App& root, Settings& s);

// Parses argv and runs the chosen command; catches everything at this edge.
int run_cli(int argc, char** argv);

}  // namespace tandem::cli
