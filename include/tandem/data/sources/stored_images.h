// What the file datasets (imagefolder, webdataset, manifest) share once they have listed
// their samples: one image file (or a member of a tar shard) and a label per sample, read
// with one read each, decoded and augmented by the pipeline, bad files handled by
// --on-bad-sample, and the reads done ahead of the cores (read_ahead.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tandem/data/core/dataset.h"
#include "tandem/data/io/read_ahead.h"
#include "tandem/data/sources/image_options.h"

namespace tandem::data {

// Where one sample's image is: a whole file, or `bytes` bytes at `offset` of a shard.
struct StoredItem {
  uint32_t file = 0;    // StoredIndex::files[file]
  uint64_t offset = 0;  // where the image starts in that file
  uint64_t bytes = 0;   // a member: its size; a whole file: its size when listed (0: not known, not checked)
  int label = 0;
  std::string member;   // a shard's member name, for messages; empty for a whole file
};

struct StoredIndex {
  std::string name;                  // the dataset's name: imagefolder | webdataset | manifest
  std::string root;                  // a file's path is root + "/" + files[i]
  std::vector<std::string> files;    // relative to root (or absolute)
  std::vector<StoredItem> items;     // the samples, in index order
  bool members = false;              // items are members of shared files (tar shards), read by pread
  int num_classes = 0;
  std::vector<std::string> class_names;  // empty: the labels have no names
  // The start of the fingerprint's description: the kind and a hash of what was listed,
  // e.g. "imagefolder/v1 files=HEX n=N"; the dataset adds size, seed and pipeline.
  std::string description;
  // Problems met while listing that --on-bad-sample skip let pass: {path, problem}.
  std::vector<std::pair<std::string, std::string>> skipped;
};

// Reads item `item` of `index` into `out` (one pread of its bytes; a whole file is checked
// against the size it had when listed). Returns "" or the problem, in words that follow the
// item's name ("cannot open: No such file or directory").
std::string read_item(const StoredIndex& index, const StoredItem& item, std::vector<uint8_t>& out);

// "ROOT/FILE" or, for a member, "ROOT/SHARD: member NAME": how messages name an item.
std::string item_name(const StoredIndex& index, const StoredItem& item);

// The default pipeline of the image datasets: "decode,random_resized_crop(S),hflip", or
// "decode,resize(S*256/224),center_crop(S)" with --split test; S = --image-size or 224.
std::string default_image_pipeline(const ImageOptions& opts);

// The dataset over `index` with --pipeline (default default_image_pipeline()). Samples are
// uint8 CHW, normalised on the trainer with ImageNet's mean/std unless the pipeline says
// otherwise. Reads go through a ReadAhead of opts.io_threads threads (none when 0) holding
// at most opts.read_ahead_bytes (0: 256 MiB), each delayed opts.emulate_read_latency_ms.
// A bad file is a DataError under --on-bad-sample fail, else the next item (same random key)
// is used and the file listed in skipped(). Throws ConfigError for unusable settings.
std::shared_ptr<const Dataset> make_stored_images(const ImageOptions& opts, StoredIndex index);

}  // namespace tandem::data
