#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>

#include "tandem/bench/bench.h"
#include "tandem/common/clock.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/io/read_ahead.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/request_depth.h"

namespace tandem::bench {

namespace {

// Images made in the measured window (after half a second of warm-up) and when the last
// measured batch ended.
struct Measured {
  uint64_t images = 0;
  Clock::time_point until{};
  int deepest = 0;  // the most batches it kept in flight
};

// Keeps two batches per thread in flight for `seconds` after the warm-up, and at least
// until one batch is measured (a batch slower than the window, an 8000 x 8000 PNG on a
// loaded machine, is measured, not reported as 0). Rethrows the first batch that could
// not be made (a bad sample under --on-bad-sample fail ends the bench, named).
Measured run_window(data::BatchMaker& maker, data::Sampler& sampler, int threads, double seconds,
                    Clock::time_point warm) {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next_seq = 0;
  Measured m;
  int in_flight = 0;
  std::exception_ptr failure;
  const auto end = warm + tandem::seconds(seconds);
  // Two batches per thread keep every thread busy between batches; from slow storage, the
  // read-ahead asks for more, as a trainer's scheduler gives a worker more (request_depth.h).
  feed::RequestDepth depth(2 * threads, 4096);
  auto submit = [&] {
    maker.make_async(sampler.request(next_seq++), [&](data::Batch b) {
          std::lock_guard lock(mu);
          depth.update(b.reads_wanted, in_flight, b.size());
          --in_flight;
          const auto now = Clock::now();
          if (now >= warm && (now < end || m.images == 0)) {
            m.images += static_cast<uint64_t>(b.size());
            m.until = now;
          }
          cv.notify_all();
        }, [&](std::exception_ptr e) {
          std::lock_guard lock(mu);
          --in_flight;
          if (!failure) failure = e;
          cv.notify_all();
        });
  };
  std::unique_lock lock(mu);
  while ((Clock::now() < end || m.images == 0) && !failure) {
    for (; in_flight < depth.depth(); ++in_flight) submit();
    // Each batch in flight ends in done or failed, so the wait past `end` ends too.
    cv.wait_until(lock, std::max(end, Clock::now() + std::chrono::seconds(1)),
                  [&] { return in_flight < depth.depth(); });
  }
  cv.wait(lock, [&] { return in_flight == 0; });
  if (failure) std::rethrow_exception(failure);
  m.deepest = depth.deepest();
  return m;
}

// The read-ahead's engine, its I/O threads, the most reads it had in flight and the bytes
// it may hold (flat: one JSON object per line, as scripts read it); nothing without one.
void add_reads(nlohmann::json& out, const data::ReadAhead* reads) {
  if (!reads) return;
  out["io_engine"] = data::io_engine_name(reads->engine());
  out["io_threads_started"] = reads->threads();
  out["reads_in_flight_most"] = reads->most_in_flight();
  out["read_ahead_max_bytes"] = reads->options().max_bytes;
}

// Threads of this process now (/proc/self/status), and its peak resident memory.
int process_threads() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return 0;
}

double max_rss_mb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

}  // namespace

nlohmann::json bench_pipeline(const BenchOptions& opts) {
  const auto made = Clock::now();
  auto dataset = data::make_dataset(opts.data);  // file datasets index their files here
  const double index_seconds = std::chrono::duration<double>(Clock::now() - made).count();
  const int threads = opts.threads > 0 ? opts.threads : available_cores();
  ThreadPool pool(threads);
  data::BatchMaker maker(dataset, &pool);
  data::Sampler sampler(dataset->info().size, opts.batch_size, opts.data.seed);
  // Half a second of warm-up, and with slow reads ten of their round trips more: the
  // request depth doubles each round trip until the reads keep up (read_depth.h).
  const auto warm = after(0.5 + 10 * opts.data.emulate_read_latency_ms / 1000);
  const Measured m = run_window(maker, sampler, threads, opts.seconds, warm);
  const double window = std::max(opts.seconds, std::chrono::duration<double>(m.until - warm).count());
  const double images_per_sec = m.images / window;
  const data::DatasetInfo& info = dataset->info();
  nlohmann::json out = {{"bench", "pipeline"},
          {"data", info.name},
          {"image_size", info.sample_shape[1]},
          {"images_per_sec", images_per_sec},
          {"images_per_sec_per_thread", images_per_sec / threads},
          {"threads", threads},
          {"batch_size", opts.batch_size},
          {"dtype", data::dtype_name(info.dtype)},
          {"seconds", opts.seconds},
          {"index_seconds", index_seconds},
          {"io_threads", dataset->read_ahead_bytes() > 0 ? data::io_threads_for(opts.data.io_threads) : 0},
          {"read_latency_ms", opts.data.emulate_read_latency_ms},
          {"batches_in_flight_most", m.deepest},
          {"process_threads", process_threads()},
          {"max_rss_mb", max_rss_mb()}};
  add_reads(out, dataset->reader());
  return out;
}

}  // namespace tandem::bench
