#include "tandem/common/error.h"

#include "tandem/common/exit_codes.h"

namespace tandem {

std::string with_context(const std::string& context, const std::exception& e) {
  std::string out = context;
  out.append(": ").append(e.what());
  return out;
}

int exit_code(const std::exception& e) noexcept {
  if (dynamic_cast<const Interrupted*>(&e)) return kExitInterrupted;
  if (dynamic_cast<const ConfigError*>(&e)) return kExitConfig;
  if (dynamic_cast<const DataError*>(&e)) return kExitData;
  if (dynamic_cast<const NetworkError*>(&e) || dynamic_cast<const PeerError*>(&e) || dynamic_cast<const Overloaded*>(&e)) {
    return kExitPeer;
  }
  return kExitFailed;
}

}  // namespace tandem
