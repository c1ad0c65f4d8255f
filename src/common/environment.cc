#include "tandem/common/environment.h"

#include <cstdlib>

namespace tandem {

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace tandem
