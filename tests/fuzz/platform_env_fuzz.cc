// libFuzzer: the environment a Slurm task or a JobSet pod sees, line by line into the
// variables discovery reads (TANDEM_JOBSET_GROUPS, JOB_INDEX, SLURM_HET_SIZE, the
// per-component node lists and task counts, ...). Every input discovers a cluster or
// throws ConfigError; nothing crashes or hangs.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include "tandem/cluster/cluster.h"
#include "tandem/cluster/roles.h"
#include "tandem/common/error.h"

namespace {

constexpr const char* kJobSet[] = {"TANDEM_JOBSET_GROUPS", "JOBSET_NAME", "REPLICATED_JOB_NAME", "JOB_INDEX",
                                   "JOB_COMPLETION_INDEX", "TANDEM_JOBSET_SUBDOMAIN"};
constexpr const char* kSlurm[] = {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_HET_SIZE",
                                  "SLURM_JOB_NODELIST_HET_GROUP_0", "SLURM_JOB_NODELIST_HET_GROUP_1",
                                  "SLURM_NTASKS_HET_GROUP_0", "SLURM_NTASKS_HET_GROUP_1", "SLURM_STEP_NUM_TASKS",
                                  "SLURM_PROCID", "SLURM_GPUS_ON_NODE", "SLURM_LOCALID", "TANDEM_HET_GROUP"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the platform; the rest are the variables' values, one per line.
  const bool jobset = data[0] & 1;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::map<std::string, std::string> vars;
  size_t start = 0, i = 0;
  const size_t count = jobset ? std::size(kJobSet) : std::size(kSlurm);
  while (start <= text.size() && i < count) {
    const size_t nl = std::min(text.find('\n', start), text.size());
    vars[jobset ? kJobSet[i] : kSlurm[i]] = text.substr(start, nl - start);
    start = nl + 1;
    ++i;
  }
  tandem::ClusterOptions opts;
  opts.sagemaker_root = "";
  try {
    const auto c = tandem::cluster::discover(opts, [&](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    });
    tandem::cluster::resolve_roles(c, opts);
  } catch (const tandem::ConfigError&) {
  }
  return 0;
}
