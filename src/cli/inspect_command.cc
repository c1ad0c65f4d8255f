#include <iostream>

#include <nlohmann/json.hpp>

#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/cluster/cluster.h"
#include "tandem/cluster/roles.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/training/runtime.h"

namespace tandem::cli {
namespace {

// What --data names, from the table of source kinds: its kind, what it needs on this host
// and whether this host has it.
nlohmann::json data_facts(const DataOptions& d) {
  const data::SourceKind& kind = data::source_kind(d.data);
  const char* needs = kind.needs == data::SourceNeeds::kNothing ? "nothing (generated)"
                      : kind.needs == data::SourceNeeds::kFiles ? "its files (PATH, else the SageMaker channel)"
                                                                : "its Python FILE";
  return {{"data", d.data}, {"kind", kind.name}, {"needs", needs}, {"here", data::dataset_is_here(d)},
          {"dtype", data::dtype_name(kind.dtype)}, {"index", kind.index != nullptr}};
}

}  // namespace

Command add_inspect_command(CLI::App& root, Settings& s) {
  CLI::App* app = root.add_subcommand(
      "inspect", "Print the resolved cluster and this host's role as JSON, with where each value came from");
  add_host_options(*app, s);  // the whole configuration, not just the cluster's
  return {app, [&s] {
            const cluster::Cluster c = cluster::discover(s.cluster);
            const Settings ported = with_job_ports(s, c);  // a Slurm job's own ports
            const cluster::RolePlan plan = cluster::resolve_roles(c, ported.cluster);
            nlohmann::json out =
                cluster::describe(c, plan, ported.cluster, 1, ported.trainer.workers, ported.trainer.worker_service);
            out["master_port"] = ported.trainer.master_port;
            out["data"] = data_facts(s.data);
            out["torch"] = training::to_json(training::torch_runtime());
            std::cout << out.dump(2) << std::endl;
            return 0;
          },
          false};
}

}  // namespace tandem::cli
