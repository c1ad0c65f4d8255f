// The scheduler's calls for sources that fail and come back (what feed::WorkerLink uses):
// fail with may_return, revive, abandon, retire.
#include "tandem/feed/scheduler.h"

#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "tandem/common/error.h"

namespace tandem::feed {
namespace {

using namespace std::chrono_literals;

data::BatchRequest request_for(uint64_t seq) { return {seq, 0, {seq}}; }

data::Batch batch_for(const data::BatchRequest& r) {
  data::Batch b;
  b.sequence = r.sequence;
  b.shape = {1, 1};
  b.labels = {static_cast<int64_t>(r.indices[0])};
  b.data = data::Buffer(4);
  return b;
}

TEST(SchedulerRecovery, ASourceThatMayReturnKeepsNextWaitingAndServesAgainOnceRevived) {
  Scheduler s(request_for, {2, 4, 10});
  const int id = s.add_source("only", 4);
  ASSERT_TRUE(s.acquire(id));
  s.fail(id, "restarting", /*may_return=*/true);
  EXPECT_FALSE(s.acquire(id)) << "a failed source takes no work";
  auto first = std::async(std::launch::async, [&] { return s.next(); });
  EXPECT_EQ(first.wait_for(100ms), std::future_status::timeout) << "gave up on a source that may return";
  s.revive(id);
  const auto again = s.acquire(id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->sequence, 0u) << "its lost request is re-issued first";
  s.complete(id, batch_for(*again));
  EXPECT_EQ(first.get()->sequence, 0u);
  EXPECT_EQ(s.stats()[0].rejoins, 1);
  EXPECT_FALSE(s.stats()[0].failed);
}

TEST(SchedulerRecovery, AbandoningTheLastSourceEndsTheWaitWithItsReason) {
  Scheduler s(request_for, {2, 4, 30});
  const int id = s.add_source("only", 4);
  s.fail(id, "restarting", /*may_return=*/true);
  auto waiting = std::async(std::launch::async, [&] { return s.next(); });
  EXPECT_EQ(waiting.wait_for(100ms), std::future_status::timeout);
  s.abandon(id, "it came back serving another dataset");
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready) << "still waiting for an abandoned source";
  try {
    waiting.get();
    FAIL() << "expected the feed to fail";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("another dataset"), std::string::npos) << e.what();
  }
  s.revive(id);
  EXPECT_TRUE(s.stats()[0].failed) << "an abandoned source does not come back";
}

TEST(SchedulerRecovery, RetireWakesAParkedAcquireAndKeepsItsRequests) {
  Scheduler s(request_for, {10, 10, 10});
  const int id = s.add_source("one", 1);
  const auto held = s.acquire(id);
  ASSERT_TRUE(held);
  auto parked = std::async(std::launch::async, [&] { return s.acquire(id).has_value(); });
  EXPECT_EQ(parked.wait_for(100ms), std::future_status::timeout) << "a second request beyond the window of 1";
  s.retire(id);
  ASSERT_EQ(parked.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(parked.get());
  s.complete(id, batch_for(*held));  // still its own: accepted
  EXPECT_EQ(s.next()->sequence, 0u);
}

TEST(SchedulerRecovery, AFailureWithoutReturnGivesUpWhenEverySourceFailed) {
  Scheduler s(request_for, {2, 4, 30});
  const int a = s.add_source("a", 4), b = s.add_source("b", 4);
  s.fail(a, "a refused us", /*may_return=*/false);
  s.fail(b, "b is restarting", /*may_return=*/true);
  auto waiting = std::async(std::launch::async, [&] { return s.next(); });
  EXPECT_EQ(waiting.wait_for(100ms), std::future_status::timeout) << "b may still return";
  s.fail(b, "b is gone", /*may_return=*/false);  // a later word on the same failure
  s.abandon(b, "b is gone for good");
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  EXPECT_THROW(waiting.get(), NetworkError);
}

}  // namespace
}  // namespace tandem::feed
