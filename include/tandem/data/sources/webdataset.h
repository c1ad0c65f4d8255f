// "webdataset:PATH": tar shards in the WebDataset convention. PATH is a folder of .tar
// shards or a brace pattern (/data/train-{000000..001023}.tar). A sample is the members
// that share a key (the path up to the first dot of the file name): an image (.jpg, .jpeg,
// .png) and a label (.cls: a decimal number; or .json with a "label" field). Samples are in
// shard order (sorted by name), then in the order of their first member in the shard.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/image_options.h"
#include "tandem/data/sources/stored_images.h"

namespace tandem::data {

// The largest class number a label member (or an index line) may hold.
inline constexpr int kMaxLabel = (1 << 24) - 1;

struct ShardSet {
  std::string root;                 // the folder the shards are in
  std::vector<std::string> names;   // file names, sorted
  std::vector<uint64_t> sizes;      // bytes of each, now
  std::string index_file;           // where `tandem index` writes the index (index_file_of)
};

// The shards PATH names: the .tar files of a folder (hidden ones skipped), or every file a
// brace pattern expands to ({a..b}: numbers, zero-padded as a is; {x,y}: words; several
// braces multiply), all in the same folder. Throws ConfigError naming what is missing.
ShardSet find_shards(const std::string& path);

// "{000..002}" -> 000, 001, 002: every name `pattern` expands to, in order. Throws
// ConfigError for an unclosed brace or a range it cannot count.
std::vector<std::string> expand_braces(const std::string& pattern);

// The index of a shard set: what walking its headers (or reading its index file) found.
struct ShardIndex {
  std::vector<StoredItem> items;   // StoredItem::file indexes ShardSet::names
  std::vector<std::pair<std::string, std::string>> problems;  // {"SHARD: member M" or "SHARD", problem}
  bool from_file = false;          // read from the index file rather than walked
};

// Walks every shard's headers, `io_threads` shards at once, and groups the members into
// samples. Every problem (not a tar, a member past the end of its shard, a key without an
// image or a label, a duplicate key, an unreadable label) is recorded, naming the shard and
// member; the samples it spoils are left out. Every read is delayed `read_latency_ms`
// (--emulate-read-latency-ms).
ShardIndex walk_shards(const ShardSet& shards, int io_threads, double read_latency_ms = 0);

// Writes `index` to shards.index_file (through a temporary file and a rename): the shards'
// names and sizes, every sample and every problem. Throws ConfigError when it cannot.
void write_shard_index(const ShardSet& shards, const ShardIndex& index);

// The index in shards.index_file when there is one and it matches the shards' names and
// sizes; nullopt (with a warning naming the difference) when it is stale, nullopt quietly
// when there is none. Throws ConfigError for a file that is not an index, naming the line.
std::optional<ShardIndex> read_shard_index(const ShardSet& shards);

// `tandem index PATH`: walks the shards' headers (`io_threads` at once), writes the index
// beside them and returns what it found and wrote, a line per problem first.
std::string index_webdataset(const std::string& path, int io_threads);

// The dataset: the index file's index when it is current, else the headers walked
// (opts.io_threads at once); problems are a ConfigError naming the first (and how many
// more) under --on-bad-sample fail, skipped() entries under skip. The fingerprint covers
// the shards' names and sizes and the index.
std::shared_ptr<const Dataset> make_webdataset(const ImageOptions& opts, const std::string& path);

}  // namespace tandem::data
