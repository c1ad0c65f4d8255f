// "manifest:FILE": a list of image files and their labels, as a CSV file (a header line
// `path,label`, then one line per sample; fields may be "quoted") or JSON lines (one
// {"path": ..., "label": N} object per line). Paths are relative to FILE's folder (or
// absolute); labels are class numbers from 0. Samples are in the file's order.
#pragma once

#include <memory>
#include <string>

#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/image_options.h"
#include "tandem/data/sources/stored_images.h"

namespace tandem::data {

// The samples `file` lists (JSON lines when its first line starts with '{', else CSV).
// Files are not opened here: one that is missing or undecodable is a bad sample when it is
// read (--on-bad-sample). Throws ConfigError naming FILE:LINE and the fix for a line that
// cannot be read (a missing header, a wrong field count, a label that is no class number,
// an empty path).
StoredIndex read_manifest(const std::string& file);

// The dataset over read_manifest(file), as make_stored_images makes it. Its fingerprint
// covers the manifest's bytes.
std::shared_ptr<const Dataset> make_manifest(const ImageOptions& opts, const std::string& file);

}  // namespace tandem::data
