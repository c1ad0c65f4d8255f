// Reading JSON that came from outside (settings files, resourceconfig.json, environment
// variables) without letting its shape crash tandem: nesting deeper than a settings
// file ever needs is refused before the parser recurses into it.
#pragma once

#include <cstddef>
#include <string_view>

namespace tandem {

inline constexpr size_t kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (strings and their escapes are
// skipped), counting up to `limit` + 1 at most; cheap, no allocation.
size_t json_depth(std::string_view text, size_t limit = kMaxJsonDepth);

}  // namespace tandem
