// Listing the members of a tar file by walking its headers, without reading the members:
// POSIX ustar (name prefixes), GNU (long names as 'L' entries, base-256 sizes) and pax
// (path and size records) as GNU tar and Python's tarfile write them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tandem::data {

// The largest member whose bytes list_tar() keeps (a label): one read window.
inline constexpr uint64_t kMaxKeptMemberBytes = 64 << 10;

struct TarMember {
  std::string name;     // its path in the archive
  uint64_t offset = 0;  // where its bytes start in the file
  uint64_t bytes = 0;
  std::string data;     // its bytes, for a member the caller asked to keep (at most kMaxKeptMemberBytes)
  bool link = false;    // a hard or symbolic link: a name without bytes of its own
};

struct TarListing {
  std::vector<TarMember> members;  // regular files and links, in archive order (directories and
                                   // pax / GNU extension entries are not members)
  // What stopped the walk early, or empty: "not a tar file (...)", "member X (N bytes at
  // offset O) runs past the end of the file (S bytes)", "a corrupt header at byte B".
  // The members before it are listed.
  std::string problem;
};

// Walks the headers of the tar file at `path`, reading 64 KiB around each one (so a small
// member that follows, a label, costs no further read). Members for which `keep(name)` is
// true and that are at most 64 KiB get their bytes in TarMember::data. A file that cannot
// be opened is a problem too. Each read is delayed `read_latency_ms` (a simulation of slow
// storage: --emulate-read-latency-ms).
TarListing list_tar(const std::string& path, const std::function<bool(const std::string&)>& keep,
                    double read_latency_ms = 0);

// Whether the 512 bytes at `header` are the tar header of a regular member of `bytes` bytes
// (a valid checksum, a file type, that size): what a shard holds just before a member's
// bytes, when the shard is still the one it was indexed from.
bool is_member_header(const char* header, uint64_t bytes);
inline constexpr uint64_t kTarHeaderBytes = 512;

}  // namespace tandem::data
