// Files written so that a reader never sees half of one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tandem {

// Writes `text` to `path` through a temporary file and a rename. Creates parent
// directories. Throws std::runtime_error naming the path; the temporary file is gone then.
void write_file_atomically(const std::string& path, const std::string& text);

// The whole of the file at `path` (binary), or nullopt when it cannot be opened or read:
// the caller names the file and the fix in its own words.
std::optional<std::string> read_file(const std::string& path);

// Why files cannot be written in `dir` ("" when they can): it is made if missing, then a
// small file is written there and removed. The reason is write_file_atomically's (a full
// disk with its free space, a read-only file system, a permission).
std::string unwritable_reason(const std::string& dir);

// Room kept for the small records a run writes last (its summary, output/failure), so
// that a disk the big files (the model, checkpoints) filled can still take them: a file
// of `bytes` at `path`, allocated on disk. False when the disk had no such room (nothing
// is left behind then). release_reserve() removes it (nothing when there is none).
bool hold_reserve(const std::string& path, uint64_t bytes);
void release_reserve(const std::string& path);

}  // namespace tandem
