// Slurm's view of a job, for discovery (issue "Beyond SageMaker"): host lists come in
// Slurm's compressed form (SLURM_JOB_NODELIST, SLURM_JOB_NODELIST_HET_GROUP_<n>).
#pragma once

#include <string>
#include <vector>

namespace tandem::cluster {

// Expands a Slurm host list: "node[01-04,07],gpu-a[1-2]x,login" -> node01 node02 node03
// node04 node07 gpu-a1x gpu-a2x login. Ranges keep the zero padding of their first
// bound; several bracket groups in one name multiply ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1
// r2n2). Throws ConfigError naming `origin` (e.g. the variable) for an unbalanced bracket,
// a bad range or more than 100,000 hosts.
std::vector<std::string> expand_hostlist(const std::string& list, const std::string& origin);

}  // namespace tandem::cluster
