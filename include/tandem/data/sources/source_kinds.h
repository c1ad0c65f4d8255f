// Every kind of dataset `--data` can name, as one table: each kind is one entry (its
// name, what it needs on the host, how it is made, which of its settings hold without
// its files). make_dataset, dataset_is_here, dataset_dtype, `tandem index`, `tandem
// inspect` and a learnt dataset's check all read it. A new source is its own file (its
// make function) and one entry in source_kinds.cc.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tandem/common/settings.h"
#include "tandem/data/sources/dataset.h"

namespace tandem::data {

// A description's settings, the kind first ({"", "imagefolder/v1"}), then {name, value}.
using DescribedSettings = std::vector<std::pair<std::string, std::string>>;

// What a kind needs on the host that makes its samples.
enum class SourceNeeds {
  kNothing,     // generated: every host can make it
  kFiles,       // a PATH after the colon, else the SageMaker channel (data_path())
  kPythonFile,  // python:FILE:NAME: the FILE
};

struct SourceKind {
  std::string_view name;   // what --data starts with: "imagefolder" in imagefolder:/data
  std::string_view usage;  // for messages: "'imagefolder[:PATH]' (one folder per class)"
  SourceNeeds needs = SourceNeeds::kNothing;
  DType dtype = DType::kFloat32;  // the samples' type, known before the dataset is made
  // Makes the dataset `opts.data` names; `path` is data_path(opts) for a kind that needs
  // files, else "".
  std::shared_ptr<const Dataset> (*make)(const DataOptions& opts, const std::string& path) = nullptr;
  // The settings `opts` fixes without the files, away from their defaults (the kind
  // first): what a host that learns this dataset from a worker can still check. nullptr:
  // a dataset that is made, not read, is never learnt.
  DescribedSettings (*fixed_settings)(const DataOptions& opts) = nullptr;
  // PATH may be a brace pattern of files ("shard-{000..099}.tar") checked one by one.
  bool brace_patterns = false;
  // `tandem index PATH`: writes what this kind reads faster at start, `io_threads` files at
  // once, and returns what it found and wrote; nullptr: the kind has no index.
  std::string (*index)(const std::string& path, int io_threads) = nullptr;
};

// The table, in the order messages list the kinds.
const std::vector<SourceKind>& source_kinds();

// The kind `data` (--data's value) names. Throws ConfigError naming the value, the
// nearest kind and every kind's usage when there is none.
const SourceKind& source_kind(const std::string& data);

// "'synthetic' (a small learnable task), ..., or 'python:FILE:NAME' (your own dataset)".
std::string source_kinds_usage();

}  // namespace tandem::data
