
#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/roles.h"
#include "tandem/launch/run.h"

namespace tandem::cli {

Command add_trainer_command(CLI::App& root, Settings& s) {
  CLI::App* app = root.add_subcommand("trainer", "Run a trainer against explicit data workers");
  add_cluster_options(*app, s.cluster);
  add_security_options(*app, s.security);
  add_data_options(*app, s.data);
  add_trainer_options(*app, s.trainer);
  add_worker_list_options(*app, s.trainer);
  return {app, [&s] {
            const auto targets = cluster::explicit_worker_targets(s.trainer.workers, s.trainer.worker_service, s.cluster);
            return launch::run_trainer(s, targets, launch::host_name(s.cluster, "trainer"));
          },
          true, true};
}

}  // namespace tandem::cli
