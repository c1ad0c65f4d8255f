#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "tandem/bench/bench.h"
#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"
#include "tandem/training/runtime.h"

namespace tandem::cli {
namespace {

struct BenchFlags {
  bench::BenchOptions opts;
  bool json = false;
};

CLI::App* add_bench(CLI::App& parent, const std::string& name, const std::string& about, BenchFlags& f) {
  CLI::App* app = parent.add_subcommand(name, about);
  add_data_options(*app, f.opts.data);
  app->add_option("--threads", f.opts.threads, "Preprocessing threads; 0 = all cores")->capture_default_str();
  app->add_option("--batch-size", f.opts.batch_size, "Samples per batch")->capture_default_str()
      ->check(positive());
  app->add_option("--seconds", f.opts.seconds, "Measured seconds")->capture_default_str()->check(positive());
  app->add_flag("--json", f.json, "Print one JSON object instead of text");
  return app;
}

void print_items(const nlohmann::json& object, const std::string& prefix) {
  for (const auto& [key, value] : object.items()) {
    if (value.is_object()) print_items(value, prefix + key + ".");
    else if (value.is_number_float()) std::cout << fmt::format("{:<40}{:.2f}\n", prefix + key, value.get<double>());
    else std::cout << fmt::format("{:<40}{}\n", prefix + key, value.dump());
  }
}

void print(const nlohmann::json& result, bool json) {
  if (json) std::cout << result.dump() << std::endl;
  else print_items(result, "");
}

}  // namespace

Command add_bench_command(CLI::App& root, Settings&) {
  static BenchFlags flags;
  flags.opts.data.data = "blur-benchmark";
  CLI::App* app = root.add_subcommand("bench", "Measure the data plane (see docs/benchmarks.md)");
  app->require_subcommand(1);
  CLI::App* pipeline = add_bench(*app, "pipeline", "Augmentation throughput on this host's cores, no network", flags);
  CLI::App* transport = add_bench(*app, "transport", "Pre-made batches from a worker to a trainer over loopback", flags);
  transport->add_option("--ranks", flags.opts.ranks, "Ranks pulling at once, each its own feed")
      ->capture_default_str()->check(positive());
  transport->add_flag("--via-relay", flags.opts.via_relay,
                      "The ranks share one stream to the worker through a relay (--share-streams on)");
  CLI::App* feed = add_bench(*app, "feed", "Two workers of different speed feeding one trainer: shares and total", flags);
  static bench::TrainBenchOptions train_opts;
  train_opts.data.data = "premade";
  train_opts.data.image_size = 224;
  train_opts.trainer.model = "resnet50";
  train_opts.trainer.batch_size = 256;
  CLI::App* train = app->add_subcommand(
      "train", "The training loop alone on device-resident data (the ceiling), then fed uint8 host batches");
  add_data_options(*train, train_opts.data);
  add_trainer_options(*train, train_opts.trainer);
  train->remove_option(train->get_option("--steps"));  // the bench counts its own
  train->remove_option(train->get_option("--epochs"));
  train->add_option("--steps", train_opts.steps, "Measured steps of each run")->capture_default_str()
      ->check(positive());
  train->add_option("--warmup", train_opts.warmup_steps, "Unmeasured steps before each run")
      ->capture_default_str()->check(non_negative());
  train->add_option("--threads", train_opts.threads, "Preprocessing threads for the fed run; 0 = spare cores")
      ->capture_default_str()->check(non_negative());
  train->add_flag("--json", flags.json, "Print one JSON object instead of text");
  return {app, [pipeline, transport, feed, train] {
            const std::string exe = std::filesystem::read_symlink("/proc/self/exe");
            if (pipeline->parsed()) print(bench::bench_pipeline(flags.opts), flags.json);
            if (transport->parsed()) print(bench::bench_transport(flags.opts, exe), flags.json);
            if (feed->parsed()) print(bench::bench_feed(flags.opts, exe), flags.json);
            if (train->parsed()) {
              training::require_builtin_trainer("tandem bench train");
              print(bench::bench_train(train_opts), flags.json);
            }
            return 0;
          },
          false};
}

}  // namespace tandem::cli
