#include <chrono>
#include <future>

#include "tandem/bench/bench.h"
#include "tandem/data/batching/convert.h"
#include "tandem/common/clock.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/transport/worker_server.h"

namespace tandem::bench {

// A worker serving pre-made batches and a trainer-side stream pulling them as fast as
// they come, in one process over loopback TCP. Only the transport is measured: the
// worker's per-batch work is one memcpy of pre-made samples.
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

  feed::FeedOptions fo;
  fo.data = data;
  fo.workers = {"127.0.0.1:" + std::to_string(port)};
  fo.batch_size = opts.batch_size;
  fo.prefetch = 8;
  fo.connect_timeout_s = 10;
  fo.batch_timeout_s = 60;
  fo.may_learn = false;
  const std::atomic<bool> never{false};
  feed::RankFeed feed(fo, never);
  feed.start(1'000'000'000, 0, 0);  // more batches than any run takes

  uint64_t bytes = 0, images = 0, batches = 0;
  const auto warm = Clock::now() + std::chrono::milliseconds(500);
  while (Clock::now() < warm) feed.next();
  const auto start = Clock::now();
  const auto end = after(opts.seconds);
  while (Clock::now() < end) {
    const auto batch = feed.next();
    bytes += batch->data.size();
    images += static_cast<uint64_t>(batch->size());
    ++batches;
  }
  const double elapsed = seconds_between(start, Clock::now());
  feed.close();
  server.stop();
  waiter.wait();
  return {{"bench", "transport"},
          {"bytes_per_sec", bytes / elapsed},
          {"images_per_sec", images / elapsed},
          {"batches", batches},
          {"batch_size", opts.batch_size},
          {"batch_bytes", batches ? bytes / batches : 0},
          {"dtype", data::dtype_name(data::wire_dtype(data))},
          {"image_size", dataset->info().sample_shape[1]},
          {"threads", wopts.threads},
          {"seconds", elapsed}};
}

}  // namespace tandem::bench
