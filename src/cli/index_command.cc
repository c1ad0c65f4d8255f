#include <iostream>

#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::cli {
namespace {

struct IndexFlags {
  std::string path;     // webdataset:PATH or PATH
  int io_threads = 32;  // shards walked at once
};

// PATH alone is webdataset's: the only kind with an index today.
int run_index(const IndexFlags& f) {
  const bool named = f.path.find(':') != std::string::npos && data::split_source(f.path).first.find('/') == std::string::npos;
  const std::string data = named ? f.path : "webdataset:" + f.path;
  const data::SourceKind& kind = data::source_kind(data);
  if (kind.index == nullptr) {
    std::string kinds;
    for (const auto& k : data::source_kinds()) {
      if (k.index != nullptr) kinds += (kinds.empty() ? "" : ", ") + std::string(k.name);
    }
    throw ConfigError("tandem index " + printable(f.path, 200) + ": a " + std::string(kind.name) +
                      " dataset has no index to write; `tandem index` indexes " + kinds);
  }
  std::cout << kind.index(data::split_source(data).second, f.io_threads) << std::flush;
  return 0;
}

}  // namespace

Command add_index_command(CLI::App& root, Settings&) {
  static IndexFlags flags;
  CLI::App* app = root.add_subcommand(
      "index", "Walk the headers of a webdataset's tar shards once and write the index beside them, so that every "
               "host of a job reads it instead (docs/datasets.md)");
  app->add_option("path", flags.path, "The shards: a folder of .tar files or a pattern like train-{000000..001023}.tar (webdataset:PATH too)")
      ->required();
  app->add_option("--io-threads", flags.io_threads, "Shards walked at once")->capture_default_str()
      ->check(in_range(1, 1024));
  return {app, [] { return run_index(flags); }, false};
}

}  // namespace tandem::cli
