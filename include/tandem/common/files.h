// Files written so that a reader never sees half of one.
#pragma once

#include <string>

namespace tandem {

// Writes `text` to `path` through a temporary file and a rename. Creates parent
// directories. Throws std::runtime_error naming the path.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace tandem
