// Workers named by their host names are looked up again whenever the feed dials them anew
// (issue 38): a worker recreated under its name at a new address (a Kubernetes pod
// evicted and rescheduled) is used again, and one whose name does not resolve yet (a pod
// still pending) joins when it does, while the others serve from the start. Real workers
// on loopback (127.0.0.2 and 127.0.0.3 are loopback too), real gRPC, and a resolver
// whose answer the test changes.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/feed/rank_feed.h"
#include "worker_fixture.h"

namespace tandem::feed {
namespace {

using namespace std::chrono_literals;
using Worker = tandem::testing::InProcessWorker;

// Batches delivered by the source named `name` so far.
uint64_t batches_from(const RankFeed& feed, const std::string& name) {
  for (const SourceStats& s : feed.scheduler().stats()) {
    if (s.name == name) return s.batches;
  }
  return 0;
}

// Takes batches until `done` or 60 s; each must be the next in sequence.
void take_until(RankFeed& feed, uint64_t& next, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "waited 60 s at batch " << next;
    auto b = feed.next();
    ASSERT_TRUE(b);
    ASSERT_EQ(b->sequence, next) << "delivered in order, none lost";
    ++next;
  }
}

TEST(WorkerNames, ALateNameJoinsAndAWorkerBackAtANewAddressIsUsedAgain) {
  const int port = tandem::testing::free_port();
  const std::string name = "worker-a:" + std::to_string(port);
  std::atomic<int> where{0};  // worker-a: 0 no answer yet, then 127.0.0.2, then 127.0.0.3
  std::atomic<int> lookups{0};
  Worker steady;  // 127.0.0.1, listed by its address: serves from the start
  FeedOptions o;
  o.data = tandem::testing::small_data();
  o.workers = {steady.target(), name};
  o.batch_size = 4;
  o.connect_timeout_s = 10;
  o.batch_timeout_s = 30;
  o.resolve = [&](const std::string& host, double) -> std::vector<std::string> {
    EXPECT_EQ(host, "worker-a") << "only names are looked up";
    ++lookups;
    if (where == 0) throw NetworkError("could not resolve host \"worker-a\": not yet");
    return {where == 1 ? "127.0.0.2" : "127.0.0.3"};
  };
  const std::atomic<bool> stop{false};
  RankFeed feed(o, stop);
  feed.start(100000, 0, 0);
  uint64_t next = 0;
  take_until(feed, next, [&] { return next >= 20; });
  EXPECT_EQ(batches_from(feed, name), 0u) << "a name that does not resolve serves nothing";
  EXPECT_GE(lookups.load(), 1);

  // Its pod is scheduled: the name resolves, and the worker joins while the run goes.
  auto a = std::make_unique<Worker>(WorkerOptions{}, tandem::testing::small_data(), SecurityOptions{},
                                    "127.0.0.2:" + std::to_string(port));
  where = 1;
  take_until(feed, next, [&] { return batches_from(feed, name) >= 10; });

  // Evicted and recreated under its name at another address: dialled there.
  a.reset();
  a = std::make_unique<Worker>(WorkerOptions{}, tandem::testing::small_data(), SecurityOptions{},
                               "127.0.0.3:" + std::to_string(port));
  where = 2;
  // Joined late (a first join, not a rejoin), then rejoined at its new address; and serves
  // there (batches it made before may still be waiting their turn when it is back, so
  // count from then).
  take_until(feed, next, [&] { return feed.scheduler().stats()[1].rejoins >= 1; });
  const uint64_t before = batches_from(feed, name);
  take_until(feed, next, [&] { return batches_from(feed, name) >= before + 10; });
  feed.close();
}

}  // namespace
}  // namespace tandem::feed
