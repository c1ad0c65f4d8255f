#include "tandem/common/error.h"

namespace tandem {

std::string with_context(const std::string& context, const std::exception& e) {
  return context + ": " + e.what();
}

}  // namespace tandem
