// Reading ahead at any sample rate (issue 34): the read-ahead wants as many samples ahead
// as its takers take during one read (rate x latency, measured), within its bytes; the
// reads fly on io_uring from one thread, or on I/O threads started as reads wait; a
// trainer's request depth to a source follows what that source's reads want, and falls
// back after. The measured rates are in docs/benchmarks.md; nothing here times anything
// but made-up clocks, or counts that a slow machine only makes larger.
#include <sys/stat.h>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "data/io/read_engines.h"
#include "image_fixtures.h"
#include "tandem/data/io/read_ahead.h"
#include "tandem/data/io/read_depth.h"
#include "tandem/feed/request_depth.h"
#include "tandem/feed/scheduler.h"

namespace tandem::data {
namespace {

using Ms = std::chrono::milliseconds;
using testing::TempDir;

// Takes `n` samples at `rate` per second from `t`, each waited or not; returns the end.
Clock::time_point take_at(ReadDepth& d, Clock::time_point t, int n, double rate, bool waited = false) {
  const auto step = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
  for (int i = 0; i < n; ++i) d.took(t += step, waited);
  return t;
}

TEST(ReadDepth, WantsRateTimesLatencyWithHeadroom) {
  Clock::time_point t{};
  ReadDepth d(t);
  EXPECT_EQ(d.wanted(t, 1 << 30), 0u) << "no read ended yet: nothing is known";
  for (int i = 0; i < 50; ++i) d.read(0.050, 10'000);  // 50 ms a read, 10 kB
  t = take_at(d, t, 2'000, 1'000);                       // 1,000 samples/s for 2 s
  EXPECT_NEAR(d.rate(t), 1'000, 20);
  EXPECT_NEAR(d.latency(), 0.050, 1e-9);
  // 1,000/s x 50 ms x 1.5 = 75 samples.
  EXPECT_NEAR(static_cast<double>(d.wanted(t, 1 << 30)), 75, 2);
  // Ten times the rate and twice the latency: twenty times the depth.
  for (int i = 0; i < 200; ++i) d.read(0.100, 10'000);
  t = take_at(d, t, 20'000, 10'000);
  EXPECT_NEAR(static_cast<double>(d.wanted(t, 1 << 30)), 1'500, 40);
}

TEST(ReadDepth, TheMemoryLimitBoundsIt) {
  Clock::time_point t{};
  ReadDepth d(t);
  for (int i = 0; i < 50; ++i) d.read(0.100, 100'000);  // 100 ms, 100 kB a read
  t = take_at(d, t, 10'000, 5'000);                      // wants 5,000 x 0.1 x 1.5 = 750
  EXPECT_GT(d.wanted(t, 1 << 30), 700u);
  EXPECT_EQ(d.wanted(t, 10'000'000), 100u) << "10 MB hold 100 reads of 100 kB";
}

TEST(ReadDepth, TakersWaitingOnReadsAskForTwiceTheirRate) {
  Clock::time_point t{};
  ReadDepth d(t);
  for (int i = 0; i < 50; ++i) d.read(0.020, 1'000);
  t = take_at(d, t, 1'000, 2'000);
  const uint64_t fed = d.wanted(t, 1 << 30);  // 2,000 x 0.02 x 1.5 = 60
  t = take_at(d, t, 1'000, 2'000, /*waited=*/true);
  EXPECT_NEAR(static_cast<double>(d.wanted(t, 1 << 30)), fed * 2.0 / 1.5, 2);
}

// Every key read by `ahead`'s engine, in order: taken once no read is left in flight
// (a read taken before it began would be the taker's own).
std::vector<Fetched> read_all(ReadAhead& ahead, const std::vector<uint64_t>& keys) {
  auto reads = ahead.start(keys);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (int quiet = 0; quiet < 3 && Clock::now() < deadline; std::this_thread::sleep_for(Ms(20))) {
    quiet = ahead.in_flight() == 0 ? quiet + 1 : 0;
  }
  std::vector<Fetched> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::optional<Fetched> f = reads->take(i);
    if (!f) ADD_FAILURE() << "key " << keys[i] << " was not read";
    out.push_back(f ? std::move(*f) : Fetched{});
  }
  return out;
}

// `n` files of distinct sizes and bytes; key i is file i, key n a missing one, key n+1 a
// file listed at another size, key n+2 a range past its end, key n+3 a header range, key
// n+4 a FIFO (no writer: an open that blocked would hang the read), key n+5 a sparse file
// of 2 GiB (larger than any read may take).
struct Files {
  TempDir dir;
  int n;
  explicit Files(int count) : n(count) {
    for (int i = 0; i < n; ++i) {
      std::ofstream(path(i), std::ios::binary) << std::string(100 + i * 37, static_cast<char>('a' + i % 26));
    }
    mkfifo((dir.path() / "fifo").c_str(), 0600);
    std::ofstream(dir.path() / "huge", std::ios::binary).close();
    std::filesystem::resize_file(dir.path() / "huge", uint64_t{2} << 30);
  }
  std::string path(int i) const { return (dir.path() / ("f" + std::to_string(i))).string(); }
  ReadPlan plan(uint64_t key) const {
    ReadPlan p;
    const int k = static_cast<int>(key);
    if (k < n) {
      p.path = path(k);
      p.whole = true;
      p.bytes = k % 2 ? 100 + k * 37 : 0;  // listed sizes, or none
    } else if (k == n) {
      p.path = path(0) + ".missing";
      p.whole = true;
    } else if (k == n + 1) {
      p.path = path(1);
      p.whole = true;
      p.bytes = 5;
    } else if (k == n + 2) {
      p.path = path(2);
      p.offset = 150;
      p.bytes = 100;
      p.member = true;
    } else if (k == n + 3) {
      p.path = path(3);
      p.offset = 20;
      p.header = 20;
      p.bytes = 60;
    } else {
      p.path = (dir.path() / (k == n + 4 ? "fifo" : "huge")).string();
      p.whole = true;
    }
    return p;
  }
};

TEST(ReadEngines, IoUringAndThreadsReadTheSameBytesAndSayTheSameProblems) {
  Files files(40);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 46; ++k) keys.push_back(k);
  std::vector<std::vector<Fetched>> got;
  for (const IoEngine engine : {IoEngine::kUring, IoEngine::kThreads}) {
    ReadAhead ahead({8, 1 << 20, engine}, ReadSource{[&](uint64_t k) { return files.plan(k); }, {}});
    if (engine == IoEngine::kUring) {
      ASSERT_EQ(ahead.engine(), IoEngine::kUring);
    }
    got.push_back(read_all(ahead, keys));
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    ReadPlan bounded = files.plan(keys[k]);
    bounded.most_bytes = 1 << 20;  // the read-ahead's bytes
    const Fetched expected = read_blocking(bounded);
    for (const auto& engine : got) {
      EXPECT_EQ(engine[k].problem, expected.problem) << "key " << k;
      EXPECT_EQ(engine[k].bytes, expected.bytes) << "key " << k;
      EXPECT_EQ(engine[k].header, expected.header) << "key " << k;
    }
  }
  EXPECT_EQ(read_blocking(files.plan(7)).bytes.size(), 100u + 7 * 37);
  EXPECT_NE(read_blocking(files.plan(40)).problem.find("cannot open: No such file"), std::string::npos);
  EXPECT_NE(read_blocking(files.plan(41)).problem.find("changed since it was indexed (5 bytes then, 137 now)"),
            std::string::npos);
  EXPECT_NE(read_blocking(files.plan(42)).problem.find("ends 76 bytes early"), std::string::npos);
  EXPECT_EQ(read_blocking(files.plan(43)).header, std::vector<uint8_t>(20, 'd'));
  EXPECT_NE(read_blocking(files.plan(44)).problem.find("not a regular file"), std::string::npos);
  EXPECT_NE(read_blocking(files.plan(45)).problem.find("is 2147483648 bytes, more than the 1024 MiB"),
            std::string::npos);
  EXPECT_NE(got[0][45].problem.find("more than the 1 MiB"), std::string::npos) << "the read-ahead's own bound";
}

// Running out of open files (or memory) is the host's problem, not the sample's: the read
// says so, and the dataset fails the request as an overloaded worker's instead of naming
// the file bad (the hostile run: "000.png: cannot open: Too many open files", exit 4).
TEST(ReadEngines, OutOfOpenFilesIsTheHostsFaultNotTheSamples) {
  ReadPlan plan;
  plan.path = "/x/000.png";
  plan.whole = true;
  ReadSteps out_of_files(plan);
  out_of_files.opened(-EMFILE);
  const Fetched f = out_of_files.take();
  EXPECT_TRUE(f.host_fault);
  EXPECT_NE(f.problem.find("Too many open files"), std::string::npos) << f.problem;
  ReadSteps missing(plan);
  missing.opened(-ENOENT);
  EXPECT_FALSE(missing.take().host_fault);
}

// Thousands of reads of 50 ms each, on one thread: io_uring keeps them in flight at once
// (a thread per read would need a thousand), and stays under the bytes it may hold.
TEST(ReadEngines, IoUringKeepsAThousandReadsInFlightOnOneThread) {
  Files files(4);
  constexpr int kKeys = 2'000;
  ReadAhead ahead({-1, 64 << 20, IoEngine::kUring, 0.050}, ReadSource{[&](uint64_t k) { return files.plan(k % 4); }, {}});
  auto reads = ahead.start(std::vector<uint64_t>(kKeys, 0));
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (ahead.most_in_flight() < 1'000 && Clock::now() < deadline) std::this_thread::sleep_for(Ms(5));
  int read = 0;
  for (int i = 0; i < kKeys; ++i) read += reads->take(i) ? 1 : 0;
  EXPECT_EQ(read, kKeys) << "every read began before it was taken";
  EXPECT_GE(ahead.most_in_flight(), 1'000u);
  EXPECT_EQ(ahead.threads(), 1);
  EXPECT_EQ(ahead.held_bytes(), 0u);
}

TEST(ReadEngines, IoUringStaysUnderItsBytesAndThreadsStartOnlyAsReadsWait) {
  Files files(1);  // 100-byte reads
  for (const IoEngine engine : {IoEngine::kUring, IoEngine::kThreads}) {
    ReadAhead ahead({256, 2'000, engine, 0.010}, ReadSource{[&](uint64_t) { return files.plan(0); }, {}});
    auto reads = ahead.start(std::vector<uint64_t>(500, 0));
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (ahead.held_bytes() < 1'900 && Clock::now() < deadline) std::this_thread::sleep_for(Ms(5));
    std::this_thread::sleep_for(Ms(50));
    // Nothing is taken: the first reads, of no known size, may share the bytes; after
    // them, 2,000 bytes hold 20 reads of 100.
    EXPECT_LE(ahead.held_bytes(), 2'000u + 256 * 100) << io_engine_name(engine);
    EXPECT_LT(ahead.held_bytes(), 500u * 100) << io_engine_name(engine);
    reads.reset();
    EXPECT_EQ(ahead.held_bytes(), 0u);
  }
  // Threads: no more than the reads that were ever in flight at once.
  ReadAhead few({1'000, 1 << 20, IoEngine::kThreads, 0.020}, ReadSource{[&](uint64_t) { return files.plan(0); }, {}});
  auto reads = few.start(std::vector<uint64_t>(8, 0));
  for (int i = 0; i < 8; ++i) reads->take(i);
  EXPECT_LE(few.threads(), 8);
  EXPECT_GE(few.threads(), 1);
}

TEST(ReadEngines, AnUnknownEngineNameIsRefusedWithTheChoices) {
  EXPECT_EQ(parse_io_engine("uring"), IoEngine::kUring);
  EXPECT_EQ(parse_io_engine("threads"), IoEngine::kThreads);
  EXPECT_EQ(parse_io_engine("auto"), IoEngine::kAuto);
  try {
    parse_io_engine("aio");
    FAIL() << "aio taken";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("use auto, uring or threads"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::data

namespace tandem::feed {
namespace {

using Ms = std::chrono::milliseconds;

TEST(RequestDepth, RisesToCoverWhatTheReadsWantAndFallsBackSlowly) {
  RequestDepth d(4, 64);
  EXPECT_EQ(d.update(0, 4, 32), 4);
  EXPECT_EQ(d.update(200, 4, 32), 11) << "4 out and 200 samples more: 7 more batches of 32";
  EXPECT_EQ(d.update(10, 11, 32), 12);
  EXPECT_EQ(d.update(5'000, 12, 32), 64) << "never over the memory's bound";
  EXPECT_EQ(d.update(-32, 64, 32), 64) << "one batch more than wanted is kept";
  EXPECT_EQ(d.update(-64, 64, 32), 63) << "two more: one request fewer";
  for (int i = 0; i < 100; ++i) d.update(-1'000, 4, 32);
  EXPECT_EQ(d.depth(), 4) << "never under where it began";
  EXPECT_EQ(d.deepest(), 64);
}

data::Batch reading_batch(uint64_t seq, int64_t wanted) {
  data::Batch b;
  b.sequence = seq;
  b.shape = {32, 1};
  b.indices.assign(32, seq);
  b.data = data::Buffer(32);
  b.reads_wanted = wanted;
  return b;
}

// A source whose batches say its reads want more is given more requests at once, beyond
// --prefetch up to max_prefetch; once it has more than it wants, fewer again.
TEST(RequestDepth, ATrainerRaisesItsDepthToAReadingBoundSourceAndLowersItAfter) {
  Scheduler s([](uint64_t seq) { return data::BatchRequest{seq, 0, {seq}}; }, {1'000, 4, 30, 0, false, false, 64});
  const int id = s.add_source("slow storage", 2);
  // Two requests out: the window.
  std::vector<uint64_t> out{s.acquire(id)->sequence, s.acquire(id)->sequence};
  s.complete(id, reading_batch(out[0], 320));  // wants 10 batches more
  EXPECT_EQ(s.stats()[0].depth, 12);
  int more = 0;
  while (more < 20) {
    auto got = std::async(std::launch::async, [&] { return s.acquire(id); });
    if (got.wait_for(Ms(200)) != std::future_status::ready) {
      s.close();
      got.get();
      break;
    }
    if (!got.get()) break;
    ++more;
  }
  EXPECT_EQ(more, 11) << "12 may be out, 1 was";
  EXPECT_EQ(s.stats()[0].deepest, 12);
}

TEST(RequestDepth, ItFallsBackWhenTheSourceHasMoreThanItWants) {
  Scheduler s([](uint64_t seq) { return data::BatchRequest{seq, 0, {seq}}; }, {1'000, 4, 30, 0, false, false, 64});
  const int id = s.add_source("slow storage", 2);
  uint64_t seq = s.acquire(id)->sequence;
  s.complete(id, reading_batch(seq, 320));
  ASSERT_EQ(s.stats()[0].depth, 11);
  for (int i = 0; i < 4; ++i) {
    seq = s.acquire(id)->sequence;
    s.complete(id, reading_batch(seq, -100));
    s.next();
  }
  EXPECT_EQ(s.stats()[0].depth, 7);
  EXPECT_EQ(s.stats()[0].deepest, 11);
}

}  // namespace
}  // namespace tandem::feed
