
#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/launch/run.h"

namespace tandem::cli {

Command add_worker_command(CLI::App& root, Settings& s) {
  CLI::App* app = root.add_subcommand("worker", "Run a data worker: serve augmented batches over gRPC");
  add_cluster_options(*app, s.cluster);
  add_security_options(*app, s.security);
  add_data_options(*app, s.data);
  add_worker_options(*app, s.worker);
  return {app, [&s] {
            return launch::run_worker(s, launch::host_name(s.cluster, "worker"), [&s](const std::string& settings) {
              return pool_job_data(s.data, settings);
            });
          },
          true};
}

}  // namespace tandem::cli
