// A pool's batch making for several jobs (SharedMaker), without the network: identical
// requests made once within the window and again beyond it, copies equal to what was
// made, failures reaching every waiter, and the cores shared by weight.
#include "tandem/transport/shared_maker.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "worker_fixture.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/core/dataset.h"

namespace tandem::transport {
namespace {

using namespace std::chrono_literals;

data::BatchRequest asking(uint64_t sequence, uint32_t epoch, uint64_t first) {
  data::BatchRequest r;
  r.sequence = sequence;
  r.epoch = epoch;
  for (uint64_t i = first; i < first + 4; ++i) r.indices.push_back(i);
  return r;
}

// Batches handed back, by job, in the order they came.
struct Received {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, data::Batch>> batches;
  int failed = 0;

  SharedMaker::Done done(const std::string& job) {
    return [this, job](data::Batch b) {
      std::lock_guard lock(mu);
      batches.emplace_back(job, std::move(b));
      cv.notify_all();
    };
  }
  SharedMaker::Failed fail() {
    return [this](std::exception_ptr) {
      std::lock_guard lock(mu);
      ++failed;
      cv.notify_all();
    };
  }
  bool wait(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 30s, [&] { return batches.size() + failed >= n; });
  }
};

// Declared after the SharedMaker and the Received it calls back: its threads are joined
// first (as DataWorker's destructor does), so no callback outlives them.
struct Maker {
  std::shared_ptr<const data::Dataset> dataset = data::make_dataset(testing::small_data());
  std::unique_ptr<ThreadPool> pool = std::make_unique<ThreadPool>(2);
  data::BatchMaker maker{dataset, pool.get()};
  ~Maker() { pool.reset(); }
};

TEST(SharedMaker, IdenticalRequestsOfTwoJobsAreMadeOnceAndEachGetsTheBatch) {
  Received got;
  SharedMaker shared({64 << 20, 2});
  Maker m;
  for (uint64_t s = 0; s < 8; ++s) {
    shared.make("a", 1, m.maker, asking(s, 0, 4 * s), got.done("a"), got.fail());
    shared.make("b", 1, m.maker, asking(100 + s, 0, 4 * s), got.done("b"), got.fail());
  }
  ASSERT_TRUE(got.wait(16));
  const auto t = shared.tallies();
  EXPECT_EQ(t.at("a").samples_served, 32u);
  EXPECT_EQ(t.at("b").samples_served, 32u);
  EXPECT_EQ(t.at("a").samples_made + t.at("b").samples_made, 32u) << "each batch made once";
  EXPECT_EQ(t.at("a").samples_shared + t.at("b").samples_shared, 32u);
  // Every copy is the batch as made, under the sequence its stream asked for.
  for (const auto& [job, b] : got.batches) {
    const uint64_t s = job == "a" ? b.sequence : b.sequence - 100;
    const data::Batch alone = m.maker.make(asking(b.sequence, 0, 4 * s));
    EXPECT_EQ(b.data, alone.data) << job << " " << b.sequence;
    EXPECT_EQ(b.indices, alone.indices);
    EXPECT_EQ(b.labels, alone.labels);
  }
  // Another epoch is another batch.
  shared.make("b", 1, m.maker, asking(200, 1, 0), got.done("b"), got.fail());
  ASSERT_TRUE(got.wait(17));
  EXPECT_EQ(shared.tallies().at("b").samples_made + shared.tallies().at("a").samples_made, 36u);
}

TEST(SharedMaker, AJobBeyondTheWindowIsMadeItsOwnBatches) {
  Received got;
  SharedMaker tiny({1, 2});  // one byte: nothing made stays
  Maker m;
  tiny.make("fast", 1, m.maker, asking(0, 0, 0), got.done("fast"), got.fail());
  ASSERT_TRUE(got.wait(1));
  tiny.make("slow", 1, m.maker, asking(0, 0, 0), got.done("slow"), got.fail());
  ASSERT_TRUE(got.wait(2));
  const auto t = tiny.tallies();
  EXPECT_EQ(t.at("slow").samples_made, 4u) << "made again, for it alone";
  EXPECT_EQ(t.at("slow").samples_shared, 0u);
  EXPECT_EQ(got.batches[0].second.data, got.batches[1].second.data);
  EXPECT_EQ(tiny.window_batches(), 0u);
}

TEST(SharedMaker, AFailedBatchFailsEveryJobWaitingForIt) {
  Received got;
  SharedMaker shared({64 << 20, 1});
  Maker m;
  data::BatchRequest bad = asking(0, 0, 0);
  bad.indices[2] = 1u << 30;  // past the dataset
  shared.make("a", 1, m.maker, bad, got.done("a"), got.fail());
  shared.make("b", 1, m.maker, bad, got.done("b"), got.fail());
  ASSERT_TRUE(got.wait(2));
  EXPECT_EQ(got.failed, 2);
  shared.make("a", 1, m.maker, asking(1, 0, 0), got.done("a"), got.fail());  // the next one is made
  ASSERT_TRUE(got.wait(3));
  EXPECT_EQ(got.batches.size(), 1u);
}

// One thread, one batch at a time, both jobs always waiting: of the first 20 batches, a
// job of weight 3 is given about three times those of a job of weight 1.
TEST(SharedMaker, TheCoresAreSharedByWeight) {
  Received got;
  SharedMaker shared({0, 1});  // nothing shared: the two jobs ask different batches anyway
  Maker m;
  for (uint64_t s = 0; s < 40; ++s) {
    shared.make("light", 1, m.maker, asking(s, 0, 4 * s), got.done("light"), got.fail());
    shared.make("heavy", 3, m.maker, asking(s, 2, 4 * s), got.done("heavy"), got.fail());
  }
  ASSERT_TRUE(got.wait(80));
  int light = 0;
  for (size_t i = 0; i < 20; ++i) light += got.batches[i].first == "light" ? 1 : 0;
  EXPECT_GE(light, 3) << "weight 1 of 4: about 5 of 20";
  EXPECT_LE(light, 8) << "weight 1 of 4: about 5 of 20";
}

}  // namespace
}  // namespace tandem::transport
