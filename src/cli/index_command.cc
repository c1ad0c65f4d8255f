#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/sources/webdataset.h"

namespace tandem::cli {
namespace {

struct IndexFlags {
  std::string path;     // webdataset:PATH or PATH
  int io_threads = 32;  // shards walked at once
};

int run_index(const IndexFlags& f) {
  const auto [source, rest] = data::split_source(f.path);
  const std::string path = source == "webdataset" ? rest : f.path;
  const auto start = std::chrono::steady_clock::now();
  const data::ShardSet shards = data::find_shards(path);
  const data::ShardIndex index = data::walk_shards(shards, f.io_threads);
  data::write_shard_index(shards, index);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& [where, problem] : index.problems) std::cout << "problem: " << where << ": " << problem << "\n";
  std::cout << fmt::format("indexed {} samples in {} shards in {:.2f} s ({} shards at once); {} problems\n",
                           index.items.size(), shards.names.size(), seconds, f.io_threads, index.problems.size())
            << "wrote " << shards.index_file << " (--data webdataset:" << path
            << " reads it while the shards' names and sizes match it)" << std::endl;
  return 0;
}

}  // namespace

Command add_index_command(CLI::App& root, Settings&) {
  static IndexFlags flags;
  CLI::App* app = root.add_subcommand(
      "index", "Walk the headers of a webdataset's tar shards once and write the index beside them, so that every "
               "host of a job reads it instead (docs/datasets.md)");
  app->add_option("path", flags.path, "The shards: a folder of .tar files or a pattern like train-{000000..001023}.tar")
      ->required();
  app->add_option("--io-threads", flags.io_threads, "Shards walked at once")->capture_default_str()
      ->check(in_range(1, 1024));
  return {app, [] { return run_index(flags); }, false};
}

}  // namespace tandem::cli
