#include "tandem/common/error.h"

#include "tandem/common/exit_codes.h"

namespace tandem {

std::string with_context(const std::string& context, const std::exception& e) {
  std::string out = context;
  out.append(": ").append(e.what());
  return out;
}

int exit_code(const std::exception& e) noexcept { return dynamic_cast<const Interrupted*>(&e) ? kExitInterrupted : kExitFailed; }

}  // namespace tandem
