#include "tandem/launch/settings.h"

#include <optional>

#include "tandem/cluster/cluster.h"

namespace tandem {

Settings with_job_ports(Settings s, const cluster::Cluster& c) {
  const std::optional<cluster::JobPorts> ports = cluster::slurm_job_ports(c);
  if (!ports) return s;
  if (!s.cluster.worker_port_given) s.cluster.worker_port = ports->worker;
  if (!s.cluster.master_port_given) s.trainer.master_port = ports->master;
  return s;
}

}  // namespace tandem
