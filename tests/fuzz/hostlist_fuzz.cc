// libFuzzer: Slurm host lists (SLURM_JOB_NODELIST and friends). Every input expands or
// throws ConfigError; nothing crashes, hangs or grows past the 100,000-host limit.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/cluster/slurm.h"
#include "tandem/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    tandem::cluster::expand_hostlist(text, "SLURM_JOB_NODELIST");
  } catch (const tandem::ConfigError&) {
  }
  return 0;
}
