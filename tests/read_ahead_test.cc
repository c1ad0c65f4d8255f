// Reading ahead for slow storage: the I/O threads fetch a batch's files concurrently, within
// their memory limit, and a preprocessing thread never waits for a read that has not begun;
// under --emulate-read-latency-ms a worker's pool and the trainer's local threads make the
// same batches as without, in far less than one latency per sample per thread. Timings
// here have wide margins (a sleep is a lower bound whatever the load); the numbers live in
// docs/benchmarks.md.
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "image_fixtures.h"
#include "process_helpers.h"
#include "tandem/common/cpu_time.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/io/read_ahead.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/local_source.h"
#include "tandem/feed/scheduler.h"

namespace tandem::data {
namespace {

using Ms = std::chrono::milliseconds;
using testing::TempDir;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(ReadAhead, FetchesConcurrentlyAndHandsEveryKeyItsBytes) {
  constexpr int kKeys = 64;
  ReadAhead ahead({16, 1 << 20}, [](uint64_t key) {
    std::this_thread::sleep_for(Ms(20));
    return Fetched{{static_cast<uint8_t>(key)}, ""};
  });
  std::vector<uint64_t> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(100 + i);
  const auto start = std::chrono::steady_clock::now();
  auto reads = ahead.start(keys);
  std::this_thread::sleep_for(Ms(5));  // let the I/O threads begin: a read not begun is the taker's own
  int fetched = 0;
  for (int i = 0; i < kKeys; ++i) {
    if (std::optional<Fetched> f = reads->take(i)) {
      ASSERT_EQ(f->bytes, std::vector<uint8_t>{static_cast<uint8_t>(100 + i)});
      ++fetched;
    }
  }
  // One by one this is 64 x 20 ms = 1.28 s; 16 at once, 80 ms. Half of one by one is a margin
  // no load breaks.
  EXPECT_LT(seconds_since(start), kKeys * 0.020 / 2);
  EXPECT_GE(fetched, kKeys / 2);
  EXPECT_EQ(ahead.held_bytes(), 0u);
}

// The I/O threads' CPU is part of making the batch: what the threads reading a sample
// spent is added to the work of the thread that takes it, so a batch's compute time, and
// with it `tandem plan`'s per-thread rate, count it (issue 32).
TEST(ReadAhead, TheReadsCpuCountsAsTheTakersWork) {
  constexpr int kKeys = 4;
  constexpr double kCpu = 0.02;  // each read: 20 ms of CPU on its I/O thread
  ReadAhead ahead({kKeys, 1 << 20}, [](uint64_t key) {
    const double end = thread_cpu_seconds() + kCpu;
    while (thread_cpu_seconds() < end) {
    }
    return Fetched{{static_cast<uint8_t>(key)}, ""};
  });
  auto reads = ahead.start({0, 1, 2, 3});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ahead.held_bytes() < kKeys && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(Ms(5));
  ASSERT_EQ(ahead.held_bytes(), static_cast<uint64_t>(kKeys)) << "the I/O threads did not read every key";
  const double before = work_cpu_seconds();
  for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(reads->take(i));
  EXPECT_GE(work_cpu_seconds() - before, kKeys * kCpu) << "the reads' CPU is not the taker's work";
}

TEST(ReadAhead, HoldsNoMoreThanItsLimitAndNeverMakesATakerWaitForAQueuedRead) {
  constexpr uint64_t kSample = 400, kLimit = 1000;
  constexpr int kThreads = 4, kKeys = 32;
  std::atomic<int> reads_done{0};
  ReadAhead ahead({kThreads, kLimit}, [&](uint64_t) {
    ++reads_done;
    return Fetched{std::vector<uint8_t>(kSample, 7), ""};
  });
  auto reads = ahead.start(std::vector<uint64_t>(kKeys, 0));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (reads_done < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(Ms(5));
  std::this_thread::sleep_for(Ms(100));  // nothing is taken: the reads stop at the limit
  EXPECT_LE(ahead.held_bytes(), kLimit + kThreads * kSample);
  EXPECT_LT(reads_done.load(), kKeys);
  // Taking in reverse order reaches reads that never began: they come back empty at once.
  auto taken = std::async(std::launch::async, [&] {
    int empty = 0;
    for (int i = kKeys - 1; i >= 0; --i) empty += reads->take(i) ? 0 : 1;
    return empty;
  });
  ASSERT_EQ(taken.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_GT(taken.get(), 0);
  EXPECT_EQ(ahead.held_bytes(), 0u);
}

TEST(ReadAhead, DroppingABatchGivesItsBytesBack) {
  ReadAhead ahead({4, 1 << 20}, [](uint64_t) { return Fetched{std::vector<uint8_t>(100, 1), ""}; });
  auto reads = ahead.start(std::vector<uint64_t>(8, 0));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ahead.held_bytes() < 800 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(Ms(2));
  EXPECT_EQ(ahead.held_bytes(), 800u);
  reads.reset();
  EXPECT_EQ(ahead.held_bytes(), 0u);
}

// Many I/O tasks waiting for room under the limit (a worker's 512 on 16 cores, batches of
// 256 in flight beyond it): each sample taken gives room to one read, and must not wake
// every waiting task to find that out (found on the H200: 12 threads made 1,100 images/s
// instead of 6,000, their cores spent switching between the woken I/O threads).
TEST(ReadAhead, RoomUnderTheLimitWakesOneWaitingReadNotAll) {
  constexpr uint64_t kSample = 100, kLimit = 4 * kSample;
  constexpr int kThreads = 128, kBatches = 16, kPerBatch = 16;
  ReadAhead ahead({kThreads, kLimit}, [](uint64_t) { return Fetched{std::vector<uint8_t>(kSample, 3), ""}; });
  std::vector<std::unique_ptr<SampleReads>> batches;
  for (int b = 0; b < kBatches; ++b) batches.push_back(ahead.start(std::vector<uint64_t>(kPerBatch, b)));
  // Let the I/O threads fill the limit and the rest of them queue up behind it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (ahead.held_bytes() < kLimit && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(Ms(2));
  std::this_thread::sleep_for(Ms(50));
  int fetched = 0;
  for (auto& batch : batches) {
    for (int i = 0; i < kPerBatch; ++i) fetched += batch->take(i) ? 1 : 0;
  }
  EXPECT_GT(fetched, 0);
  EXPECT_EQ(ahead.held_bytes(), 0u);
  // Waking every waiting task at each sample taken costs up to kThreads wake-ups per
  // sample (tens of thousands here); handing room on costs about one.
  const uint64_t samples = kBatches * kPerBatch;
  EXPECT_LE(ahead.idle_wakeups(), 2 * samples) << "I/O tasks woken only to wait again";
}

// An image folder of `n` small JPEGs in two classes.
void make_jpegs(const std::filesystem::path& root, int n) {
  for (int i = 0; i < n; ++i) {
    const std::string name = (i % 2 ? "b/" : "a/") + std::to_string(i) + ".jpg";
    testing::write_bytes(root / name, testing::encode_jpeg(testing::gradient_image(24, 32, 3, i)));
  }
}

DataOptions slow_folder(const std::string& root, int io_threads) {
  DataOptions opts;
  opts.data = "imagefolder:" + root;
  opts.pipeline = "decode,random_resized_crop(16),hflip";
  opts.io_threads = io_threads;
  opts.emulate_read_latency_ms = 20;
  return opts;
}

// Every batch of one epoch made on a 2-thread pool, and the seconds it took.
std::pair<std::vector<std::vector<std::byte>>, double> one_epoch(const DataOptions& opts, int batch) {
  auto dataset = make_dataset(opts);
  ThreadPool pool(2);
  BatchMaker maker(dataset, &pool);
  Sampler sampler(dataset->info().size, batch, 0);
  std::vector<std::future<Batch>> done;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t s = 0; s < sampler.batches_per_epoch(); ++s) {
    auto promise = std::make_shared<std::promise<Batch>>();
    done.push_back(promise->get_future());
    maker.make_async(sampler.request(s), [promise](Batch b) { promise->set_value(std::move(b)); },
                     [promise](std::exception_ptr e) { promise->set_exception(e); });
  }
  std::vector<std::vector<std::byte>> out;
  for (auto& f : done) {
    Batch b = f.get();
    out.emplace_back(b.data.data(), b.data.data() + b.data.size());
  }
  return {out, seconds_since(start)};
}

// The default (--io-threads auto, -1) reads ahead.
TEST(ReadAhead, AWorkersPoolUnderReadLatencyMakesTheSameBatchesFarFaster) {
  constexpr int kImages = 128;
  TempDir dir;
  make_jpegs(dir.path(), kImages);
  const auto [ahead, ahead_s] = one_epoch(slow_folder(dir.str(), DataOptions{}.io_threads), 32);
  const auto [plain, plain_s] = one_epoch(slow_folder(dir.str(), 0), 32);
  EXPECT_EQ(ahead, plain);
  // Without reading ahead, 2 threads wait 128 x 20 ms / 2 = 1.28 s at least.
  EXPECT_GE(plain_s, kImages * 0.020 / 2);
  EXPECT_LT(ahead_s, kImages * 0.020 / 2 / 2) << "reading ahead took " << ahead_s << " s, without " << plain_s;
}

TEST(ReadAhead, TheTrainersLocalThreadsReadAheadToo) {
  constexpr int kImages = 96, kBatch = 16;
  TempDir dir;
  make_jpegs(dir.path(), kImages);
  auto dataset = make_dataset(slow_folder(dir.str(), 32));
  ASSERT_GT(dataset->read_ahead_bytes(), 0u);
  Sampler sampler(dataset->info().size, kBatch, 0);
  feed::Scheduler scheduler([&](uint64_t s) { return sampler.request(s); },
                            {sampler.batches_per_epoch(), 4, 60, 0});
  const auto start = std::chrono::steady_clock::now();
  std::vector<Batch> got;
  {
    feed::LocalSource local(scheduler, dataset, 2, DType::kUInt8);
    while (auto b = scheduler.next()) got.push_back(std::move(*b));
  }
  const double took = seconds_since(start);
  BatchMaker plain(make_dataset(slow_folder(dir.str(), 0)), nullptr, DType::kUInt8);
  ASSERT_EQ(got.size(), sampler.batches_per_epoch());
  for (uint64_t s = 0; s < got.size(); ++s) {
    const Batch expected = plain.make(sampler.request(s));
    ASSERT_EQ(got[s].sequence, s);
    EXPECT_TRUE(std::equal(got[s].data.data(), got[s].data.data() + got[s].data.size(), expected.data.data()));
    EXPECT_EQ(got[s].labels, expected.labels);
  }
  EXPECT_LT(took, kImages * 0.020 / 2 / 2);  // one by one on 2 threads: 0.96 s at least
}

// --io-threads auto (the default) is 32 reads in flight per core this process may use
// (taskset, cgroup quota), 64 to 1024;
// a number is taken as given, and 0 turns reading ahead off. `bench pipeline` reports
// what it ran with.
TEST(IoThreads, AutoIs32PerCoreWithinBoundsAndTheFlagTakesAutoOrANumber) {
  EXPECT_EQ(io_threads_for(-1), std::clamp(32 * available_cores(), 64, 1024));
  EXPECT_EQ(io_threads_for(0), 0);
  EXPECT_EQ(io_threads_for(7), 7);
  TempDir dir;
  make_jpegs(dir.path(), 8);
  auto io_threads_run = [&](const std::string& flag) {
    const std::string args = "bench pipeline --data imagefolder:" + dir.str() +
                             " --pipeline 'decode,center_crop(16)' --threads 1 --batch-size 4 --seconds 0.2 --json " + flag;
    const tandem::testing::Outcome run = tandem::testing::run_capture(args, dir.path() / "bench.log", 60);
    const size_t json = run.out.rfind('{');
    if (run.code != 0 || json == std::string::npos) {
      ADD_FAILURE() << "exit " << run.code << ": " << run.out;
      return -100;
    }
    return nlohmann::json::parse(run.out.substr(json)).value("io_threads", -100);
  };
  EXPECT_EQ(io_threads_run(""), io_threads_for(-1));
  EXPECT_EQ(io_threads_run("--io-threads auto"), io_threads_for(-1));
  EXPECT_EQ(io_threads_run("--io-threads 5"), 5);
  EXPECT_EQ(io_threads_run("--io-threads 0"), 0);
  const tandem::testing::Outcome bad = tandem::testing::run_capture(
      "bench pipeline --data imagefolder:" + dir.str() + " --io-threads many", dir.path() / "bad.log");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--io-threads: 'many' is not a number"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace tandem::data
