#include <sys/resource.h>

#include <chrono>
#include <future>
#include <thread>

#include "tandem/bench/bench.h"
#include "tandem/data/batching/convert.h"
#include "tandem/common/clock.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/transport/stream_relay.h"
#include "tandem/transport/worker_server.h"

namespace tandem::bench {
namespace {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

struct Pulled {
  uint64_t bytes = 0, images = 0, batches = 0;
};

// One rank of `ranks` pulling until `end`, counting from `start`.
Pulled pull(feed::RankFeed& feed, Clock::time_point start, Clock::time_point end) {
  Pulled p;
  while (Clock::now() < start) feed.next();
  while (Clock::now() < end) {
    const auto batch = feed.next();
    p.bytes += batch->data.size();
    p.images += static_cast<uint64_t>(batch->size());
    ++p.batches;
  }
  return p;
}

feed::FeedOptions rank_options(const BenchOptions& opts, const DataOptions& data, int port, int rank,
                               const std::string& relay) {
  feed::FeedOptions fo;
  fo.data = data;
  fo.workers = {"127.0.0.1:" + std::to_string(port)};
  fo.rank = rank;
  fo.world = opts.ranks;
  fo.batch_size = opts.batch_size;
  fo.prefetch = 8;
  fo.connect_timeout_s = 10;
  fo.batch_timeout_s = 60;
  fo.may_learn = false;
  fo.relay = relay;
  return fo;
}

}  // namespace

// A worker serving pre-made batches and `ranks` trainer-side feeds pulling them as fast as
// they come, in one process over loopback TCP (through a relay's Unix socket with
// via_relay). Only the transport is measured: the worker's per-batch work is one memcpy
// of pre-made samples.
nlohmann::json bench_transport(const BenchOptions& opts, const std::string&) {
  transport::keep_grpc_initialised();
  DataOptions data = opts.data;
  data.data = "premade";
  auto dataset = data::make_dataset(data);
  WorkerOptions wopts;
  wopts.threads = opts.threads > 0 ? opts.threads : 1;
  transport::WorkerServer server(dataset, wopts, "bench", data::wire_dtype(data));
  const int port = server.start("127.0.0.1:0");
  auto waiter = std::async(std::launch::async, [&] { return server.wait(); });
  std::unique_ptr<transport::StreamRelay> relay;
  if (opts.via_relay) relay = std::make_unique<transport::StreamRelay>(transport::StreamRelayOptions{});

  const std::atomic<bool> never{false};
  std::vector<std::unique_ptr<feed::RankFeed>> feeds;
  for (int r = 0; r < opts.ranks; ++r) {
    feeds.push_back(std::make_unique<feed::RankFeed>(rank_options(opts, data, port, r, relay ? relay->address() : ""), never));
    feeds.back()->start(1'000'000'000, 0, 0);  // more batches than any run takes
  }
  const auto start = Clock::now() + std::chrono::milliseconds(500);
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.seconds));
  std::vector<std::future<Pulled>> pulls;
  for (auto& f : feeds) pulls.push_back(std::async(std::launch::async, [&f, start, end] { return pull(*f, start, end); }));
  std::this_thread::sleep_until(start);
  const double cpu0 = process_cpu_seconds();
  Pulled all;
  for (auto& p : pulls) {
    const Pulled one = p.get();
    all.bytes += one.bytes;
    all.images += one.images;
    all.batches += one.batches;
  }
  const double cpu = process_cpu_seconds() - cpu0;
  const double elapsed = seconds_between(start, Clock::now());
  for (auto& f : feeds) f->close();
  relay.reset();
  server.stop();
  waiter.wait();
  return {{"bench", "transport"},
          {"bytes_per_sec", all.bytes / elapsed},
          {"bytes_per_cpu_second", cpu > 0 ? all.bytes / cpu : 0.0},
          {"images_per_sec", all.images / elapsed},
          {"batches", all.batches},
          {"batch_size", opts.batch_size},
          {"batch_bytes", all.batches ? all.bytes / all.batches : 0},
          {"dtype", data::dtype_name(data::wire_dtype(data))},
          {"image_size", dataset->info().sample_shape[1]},
          {"threads", wopts.threads},
          {"ranks", opts.ranks},
          {"via_relay", opts.via_relay},
          {"process_cpu_seconds", cpu},
          {"seconds", elapsed}};
}

}  // namespace tandem::bench
