// Hashes for fingerprints: FNV-1a, stable across builds and machines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

// Hex FNV-1a of a description string; stable across builds and machines.
std::string fingerprint_of(const std::string& description);

// FNV-1a 64 of `data` continuing from `hash`, for fingerprints built piece by piece.
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
uint64_t fnv1a(std::string_view data, uint64_t hash = kFnvOffset);

// `h` as 16 lowercase hex digits, the form fingerprints and descriptions print hashes in.
std::string hex64(uint64_t h);

}  // namespace tandem
