#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>

#include "tandem/common/clock.h"
#include "tandem/bench/bench.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/batching/thread_pool.h"
#include "tandem/data/sources/read_ahead.h"

namespace tandem::bench {

namespace {

// Images made in the measured window (after half a second of warm-up) and when the last
// measured batch ended.
struct Measured {
  uint64_t images = 0;
  Clock::time_point until{};
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
  // Two batches per thread keep every thread busy between batches, and give the read-ahead
  // (--io-threads) batches to fetch before a thread reaches them, as a worker's queue does.
  const int depth = 2 * threads;
  auto submit = [&] {
    maker.make_async(sampler.request(next_seq++), [&](data::Batch b) {
          std::lock_guard lock(mu);
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
    for (; in_flight < depth; ++in_flight) submit();
    // Each batch in flight ends in done or failed, so the wait past `end` ends too.
    cv.wait_until(lock, std::max(end, Clock::now() + std::chrono::seconds(1)), [&] { return in_flight < depth; });
  }
  cv.wait(lock, [&] { return in_flight == 0; });
  if (failure) std::rethrow_exception(failure);
  return m;
}

}  // namespace

nlohmann::json bench_pipeline(const BenchOptions& opts) {
  const auto made = Clock::now();
  auto dataset = data::make_dataset(opts.data);  // file datasets index their files here
  const double index_seconds = std::chrono::duration<double>(Clock::now() - made).count();
  const int threads = opts.threads > 0 ? opts.threads : data::available_cores();
  data::ThreadPool pool(threads);
  data::BatchMaker maker(dataset, &pool);
  data::Sampler sampler(dataset->info().size, opts.batch_size, opts.data.seed);
  const auto warm = Clock::now() + std::chrono::milliseconds(500);
  const Measured m = run_window(maker, sampler, threads, opts.seconds, warm);
  const double window = std::max(opts.seconds, std::chrono::duration<double>(m.until - warm).count());
  const double images_per_sec = m.images / window;
  const data::DatasetInfo& info = dataset->info();
  return {{"bench", "pipeline"},
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
          {"read_latency_ms", opts.data.emulate_read_latency_ms}};
}

}  // namespace tandem::bench
