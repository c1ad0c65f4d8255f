#include <iostream>
#include <optional>

#include "tandem/cli/commands.h"
#include "tandem/cli/plan_flags.h"
#include "tandem/common/error.h"
#include "tandem/report/html_report.h"

namespace tandem::cli {

Command add_report_command(CLI::App& root, Settings&) {
  static std::string run, output, prices_file;
  static std::vector<std::string> prices;
  static plan::PlanOptions options;
  CLI::App* app = root.add_subcommand(
      "report", "Write a run's report: one self-contained HTML page with charts and the plan (tandem plan)");
  app->add_option("run", run, "The run's summary.json, or its run directory")->required();
  app->add_option("-o,--output", output, "Where to write the page (default: report.html beside summary.json)");
  add_plan_flags(*app, prices_file, prices, options);
  return {app, [] {
            // Bad price flags are the user's to fix now; a plan the run cannot support is
            // explained on the page instead.
            std::optional<plan::PriceTable> table;
            try {
              table = plan::load_prices(prices_file, prices);
            } catch (const ConfigError&) {
              if (!prices_file.empty() || !prices.empty()) throw;
            }
            const std::string path = report::write_run_report(run, output, table ? &*table : nullptr, options);
            std::cout << "wrote " << path << std::endl;
            return 0;
          },
          false};
}

}  // namespace tandem::cli
