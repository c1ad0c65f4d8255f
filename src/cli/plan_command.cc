#include <iostream>

#include "tandem/cli/commands.h"
#include "tandem/cli/plan_flags.h"
#include "tandem/plan/planner.h"
#include "tandem/report/run_files.h"

namespace tandem::cli {

namespace {

struct PlanFlags {
  std::string run;
  std::string prices_file;
  std::vector<std::string> prices;
  plan::PlanOptions options;
  double ceiling = 0.0;
  bool json = false;
};

}  // namespace

void add_plan_flags(CLI::App& app, std::string& prices_file, std::vector<std::string>& prices,
                    plan::PlanOptions& options) {
  app.add_option("--trainer-type", options.trainer_type,
                 "Trainer instance type to price (default: the run's plan_inputs.trainer_instance_type)");
  app.add_option("--worker-type", options.worker_type,
                 "Data-worker instance type to plan for (default: the run's plan_inputs.worker_instance_type)");
  app.add_option("--prices", prices_file,
                 "Price file (JSON, like data/sagemaker-prices.json); default: the one installed with tandem")
      ->check(CLI::ExistingFile);
  app.add_option("--price", prices, "Override or add one price, TYPE=DOLLARS per instance-hour (repeatable)")
      ->allow_extra_args(false);  // one value per --price: never swallow the run positional
  app.add_option("--within", options.within_pct,
                 "Also name the fastest choice costing at most this % more per sample than the cheapest")
      ->capture_default_str()->check(CLI::Range(0.0, 1000.0));
  app.add_option("--max-workers", options.max_workers, "Largest number of workers in the table")
      ->capture_default_str()->check(CLI::Range(1, 10000));
  app.add_option("--sweep-jobs", options.sweep_jobs,
                 "Also plan a sweep of this many such jobs on one pool (tandem worker --pool-jobs) against a pool each")
      ->capture_default_str()->check(CLI::Range(0, 10000));
  app.add_option("--reserve-per-rank", options.reserve_vcpus_per_rank,
                 "vCPUs of a trainer host each rank's training loop keeps; the rest make samples at N = 0")
      ->capture_default_str()->check(CLI::Range(0, 64));
}

Command add_plan_command(CLI::App& root, Settings&) {
  static PlanFlags f;
  CLI::App* app = root.add_subcommand(
      "plan", "How many data-worker instances to add, and what each choice costs, from a run's measurements");
  app->add_option("run", f.run, "The run's summary.json, or its run directory")->required();
  add_plan_flags(*app, f.prices_file, f.prices, f.options);
  app->add_option("--ceiling", f.ceiling,
                  "Samples/s the training loop takes when never waiting for data (default: the summary's "
                  "throughput.ceiling_samples_per_sec)")
      ->check(CLI::PositiveNumber);
  app->add_flag("--json", f.json, "Print the plan as one JSON object");
  return {app, [] {
            const nlohmann::json summary = report::read_json_file(report::find_summary(f.run));
            if (f.ceiling > 0) f.options.ceiling = f.ceiling;
            const nlohmann::json p = plan::make_plan(summary, plan::load_prices(f.prices_file, f.prices), f.options);
            std::cout << (f.json ? p.dump(2) + "\n" : plan::format_plan_text(p)) << std::flush;
            return 0;
          },
          false};
}

}  // namespace tandem::cli
