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

#include "tandem/data/core/dataset.h"
#include "tandem/data/core/options.h"
#include "tandem/data/python/process_pool.h"
#include "tandem/data/sources/image_options.h"
#include "tandem/data/sources/python_dataset.h"
#include "tandem/data/sources/synthetic.h"

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
  std::shared_ptr<const Dataset> (*make)(const DataOptions& opts, const DataRole& role, const std::string& path) = nullptr;
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

// Each kind's own options from the settings: the one place (with the table's make
// functions) where a source's settings are read out of DataOptions.
GeneratedOptions generated_options(const DataOptions& opts);
ImageOptions image_options(const DataOptions& opts, const DataRole& role = {});
PythonDatasetOptions python_dataset_options(const DataOptions& opts, const DataRole& role = {});
PythonRuntime python_runtime(const DataOptions& opts, const DataRole& role = {});

// False when `opts` names files (imagefolder, mnist, webdataset, manifest: a PATH or the SageMaker channel;
// python:FILE:NAME: FILE) that this host does not have; true for generated datasets. A
// trainer without the files learns the dataset from its workers.
bool dataset_is_here(const DataOptions& opts);

// Builds the dataset that `opts.data` names: synthetic | blur-benchmark | premade |
// imagefolder[:PATH] | mnist[:PATH] | webdataset[:PATH] (without PATH:
// <sagemaker root>/input/data/<channel>) | manifest:FILE | python:FILE:NAME
// (python_dataset.h: starts its Python processes).
// File datasets index their files here, once. Throws ConfigError for unknown names,
// settings the dataset cannot honour, and unusable data (naming the path).
std::shared_ptr<const Dataset> make_dataset(const DataOptions& opts, const DataRole& role = {});

// The dtype make_dataset(opts) produces samples in, without building it: uint8 for
// imagefolder, webdataset, manifest, mnist and python, float32 for the others.
DType dataset_dtype(const DataOptions& opts);

// The value of setting `name` in a dataset's description ("file" of "python/v1 code=..
// file=my_data.py name=Flowers ..." is "my_data.py"), or "" when it has none.
std::string description_setting(const std::string& description, const std::string& name);

// How a peer's dataset differs from ours, from the two descriptions (DatasetInfo::
// description): one "image size 64, this trainer expects 32 (--image-size)" per setting
// that differs, joined by "; " (values shortened and escaped). Empty when either
// description is empty or they name no differing setting.
// `who` names our side ("this trainer", "this feed").
std::string describe_difference(const std::string& theirs, const std::string& ours,
                                std::string_view who = "this trainer");

// The same against this host's own settings, for a host that learns its dataset from a
// worker (no copy of the files here): the settings `ours` fixes without the files and
// sets away from their defaults (the kind of dataset; seed, --dataset-size; imagefolder's
// pipeline, from --pipeline, --image-size or --split, and pixel limit; a Python dataset's
// file name, its bytes when this host has the file, NAME and --data-args) that the worker's description says otherwise. A setting left at
// its default takes the worker's.
std::string describe_difference(const std::string& theirs, const DataOptions& ours,
                                std::string_view who = "this trainer");

}  // namespace tandem::data
