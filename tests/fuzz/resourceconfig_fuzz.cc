// libFuzzer: resourceconfig.json as SageMaker writes it, or anything else. Every input
// either parses into a cluster or throws ConfigError; nothing crashes or hangs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/cluster/cluster.h"
#include "tandem/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    tandem::cluster::parse_resource_config(text, "resourceconfig.json");
  } catch (const tandem::ConfigError&) {
  }
  return 0;
}
