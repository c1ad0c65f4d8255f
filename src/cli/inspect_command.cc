#include <iostream>

#include <nlohmann/json.hpp>

#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/cluster/cluster.h"
#include "tandem/cluster/roles.h"
#include "tandem/training/runtime.h"

namespace tandem::cli {

Command add_inspect_command(CLI::App& root, Settings& s) {
  CLI::App* app = root.add_subcommand(
      "inspect", "Print the resolved cluster and this host's role as JSON, with where each value came from");
  add_host_options(*app, s);  // the whole configuration, not just the cluster's
  return {app, [&s] {
            const cluster::Cluster c = cluster::discover(s.cluster);
            const cluster::RolePlan plan = cluster::resolve_roles(c, s.cluster);
            nlohmann::json out = cluster::describe(c, plan, s.cluster, 1, s.trainer.workers, s.trainer.worker_service);
            out["torch"] = training::to_json(training::torch_runtime());
            std::cout << out.dump(2) << std::endl;
            return 0;
          },
          false};
}

}  // namespace tandem::cli
