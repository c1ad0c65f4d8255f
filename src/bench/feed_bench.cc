#include <chrono>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/bench/bench.h"
#include "tandem/common/clock.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/launch/process.h"
#include "tandem/launch/simulate.h"
#include "tandem/transport/grpc_runtime.h"

namespace tandem::bench {
namespace {

struct WorkerSpec {
  std::vector<int> cpus;
  int port = 0;
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
};

// One worker twice as fast as the other: k cores and 2k cores. On fewer than three cores
// that is impossible, and the two get one core each.
std::vector<WorkerSpec> plan_workers() {
  const int cores = available_cores();
  const int k = std::max(cores / 3, 1);
  std::vector<WorkerSpec> w(2);
  if (cores >= 3) {
    for (int c = 0; c < k; ++c) w[0].cpus.push_back(c);
    for (int c = k; c < 3 * k; ++c) w[1].cpus.push_back(c);
  } else {
    w[0].cpus = {0};
    w[1].cpus = {cores > 1 ? 1 : 0};
  }
  const auto ports = launch::free_loopback_ports(2);
  w[0].port = ports[0];
  w[1].port = ports[1];
  return w;
}

struct Phase {
  double images_per_sec = 0;
  std::vector<uint64_t> batches;  // per worker of the phase
  std::vector<int> deepest;       // per worker: the most requests it was given at once
};

// Pulls batches from `targets` for `seconds` (after a warm-up) and counts them.
Phase measure(const std::vector<std::string>& targets, const BenchOptions& opts) {
  feed::FeedOptions fo;
  fo.data = opts.data;
  fo.workers = targets;
  fo.batch_size = opts.batch_size;
  fo.connect_timeout_s = 60;
  fo.may_learn = false;
  const std::atomic<bool> never{false};
  feed::RankFeed feed(fo, never);
  feed.start(1'000'000'000, 0, 0);
  const auto warm = Clock::now() + std::chrono::seconds(1);
  while (Clock::now() < warm) feed.next();
  const auto before = feed.scheduler().stats();
  uint64_t images = 0;
  const auto start = Clock::now();
  const auto end = after(opts.seconds);
  while (Clock::now() < end) images += static_cast<uint64_t>(feed.next()->size());
  const double elapsed = seconds_between(start, Clock::now());
  const auto stats = feed.scheduler().stats();
  for (const auto& s : stats) {
    if (s.failed) spdlog::warn("bench feed: {} failed: {}", s.name, s.error);
  }
  feed.close();
  Phase p;
  p.images_per_sec = images / elapsed;
  for (size_t i = 0; i < stats.size(); ++i) {
    p.batches.push_back(stats[i].batches - before[i].batches);
    p.deepest.push_back(stats[i].deepest);
  }
  return p;
}

// A worker of the bench: its port and cores, and the data flags of the bench (the read
// latency and how reads fly among them: the request depth is part of what is measured).
std::vector<std::string> worker_argv(const std::string& tandem_exe, const BenchOptions& opts, const WorkerSpec& spec) {
  const DataOptions& d = opts.data;
  std::vector<std::string> argv = {tandem_exe, "worker", "--port", std::to_string(spec.port), "--bind", "127.0.0.1",
                                   "--threads", std::to_string(spec.cpus.size()), "--data", d.data,
                                   "--image-size", std::to_string(d.image_size), "--idle-timeout", "600",
                                   "--emulate-read-latency-ms", fmt::format("{}", d.emulate_read_latency_ms),
                                   "--io-threads", std::to_string(d.io_threads), "--io-engine", d.io_engine};
  if (!d.pipeline.empty()) argv.insert(argv.end(), {"--pipeline", d.pipeline});
  return argv;
}

}  // namespace

nlohmann::json bench_feed(const BenchOptions& opts, const std::string& tandem_exe) {
  transport::keep_grpc_initialised();
  const std::string data_name = data::make_dataset(opts.data)->info().name;
  const std::vector<WorkerSpec> specs = plan_workers();
  std::vector<launch::ProcessSpec> children;
  for (size_t i = 0; i < specs.size(); ++i) {
    launch::ProcessSpec c;
    c.name = i == 0 ? "worker-a" : "worker-b";
    c.argv = worker_argv(tandem_exe, opts, specs[i]);
    c.cpus = specs[i].cpus;
    c.critical = false;
    children.push_back(std::move(c));
  }
  launch::SuperviseOptions sup;
  sup.timeout_s = 4 * (opts.seconds + 1) + 180;
  sup.out = &std::cerr;  // stdout carries the result
  std::thread supervisor([&] { launch::supervise(children, sup); });

  const Phase a = measure({specs[0].target()}, opts);
  const Phase b = measure({specs[1].target()}, opts);
  const Phase both = measure({specs[0].target(), specs[1].target()}, opts);
  feed::release_workers({specs[0].target(), specs[1].target()}, {}, "bench over");
  supervisor.join();

  const double solo_sum = a.images_per_sec + b.images_per_sec;
  const uint64_t total = both.batches[0] + both.batches[1];
  nlohmann::json workers = nlohmann::json::array();
  const double solo[2] = {a.images_per_sec, b.images_per_sec};
  for (int i = 0; i < 2; ++i) {
    workers.push_back({{"cores", specs[i].cpus.size()},
                       {"solo_images_per_sec", solo[i]},
                       {"share", total ? static_cast<double>(both.batches[i]) / total : 0.0},
                       {"requests_deepest", both.deepest[i]},
                       {"expected_share", solo_sum > 0 ? solo[i] / solo_sum : 0.0}});
  }
  return {{"bench", "feed"},
          {"data", data_name},
          {"images_per_sec", both.images_per_sec},
          {"solo_sum_images_per_sec", solo_sum},
          {"ratio_to_solo_sum", solo_sum > 0 ? both.images_per_sec / solo_sum : 0.0},
          {"workers", workers},
          {"batch_size", opts.batch_size},
          {"dtype", data::dtype_name(data::wire_dtype(opts.data))},
          {"seconds", opts.seconds},
          {"read_latency_ms", opts.data.emulate_read_latency_ms}};
}

}  // namespace tandem::bench
