#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "tandem/bench/bench.h"
#include "tandem/cli/commands.h"
#include "tandem/cli/options.h"

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
      ->check(CLI::PositiveNumber);
  app->add_option("--seconds", f.opts.seconds, "Measured seconds")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_flag("--json", f.json, "Print one JSON object instead of text");
  return app;
}

void print(const nlohmann::json& result, bool json) {
  if (json) {
    std::cout << result.dump() << std::endl;
    return;
  }
  for (const auto& [key, value] : result.items()) {
    if (value.is_number_float()) std::cout << fmt::format("{:<28}{:.1f}\n", key, value.get<double>());
    else std::cout << fmt::format("{:<28}{}\n", key, value.dump());
  }
}

}  // namespace

Command add_bench_command(CLI::App& root, Settings&) {
  static BenchFlags flags;
  flags.opts.data.data = "blur-benchmark";
  CLI::App* app = root.add_subcommand("bench", "Measure the data plane (see docs/benchmarks.md)");
  app->require_subcommand(1);
  CLI::App* pipeline = add_bench(*app, "pipeline", "Augmentation throughput on this host's cores, no network", flags);
  CLI::App* transport = add_bench(*app, "transport", "Pre-made batches from a worker to a trainer over loopback", flags);
  CLI::App* feed = add_bench(*app, "feed", "Two workers of different speed feeding one trainer: shares and total", flags);
  return {app, [pipeline, transport, feed] {
            const std::string exe = std::filesystem::read_symlink("/proc/self/exe");
            if (pipeline->parsed()) print(bench::bench_pipeline(flags.opts), flags.json);
            if (transport->parsed()) print(bench::bench_transport(flags.opts, exe), flags.json);
            if (feed->parsed()) print(bench::bench_feed(flags.opts, exe), flags.json);
            return 0;
          },
          false};
}

}  // namespace tandem::cli
