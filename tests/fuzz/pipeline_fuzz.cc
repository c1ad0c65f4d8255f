// libFuzzer: the --pipeline spec (text or JSON list). Parses or throws ConfigError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/common/error.h"
#include "tandem/data/augment/pipeline_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    tandem::data::parse_pipeline(text);
  } catch (const tandem::ConfigError&) {
  }
  return 0;
}
