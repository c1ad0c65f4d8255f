#include "tandem/common/hash.h"

#include <cstdio>

namespace tandem {

uint64_t fnv1a(std::string_view data, uint64_t hash) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string hex64(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string fingerprint_of(const std::string& description) { return hex64(fnv1a(description)); }

}  // namespace tandem
