// The feed's policy for one worker (feed::WorkerLink) against a scripted fake client: no
// network, each test well under a second.
#include "tandem/feed/worker_link.h"

#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "fake_worker_client.h"
#include "tandem/common/backoff.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/sources/source_kinds.h"
#include "worker_fixture.h"

namespace tandem::feed {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorkerClient;
using testing::FakeWorkerState;
using testing::StreamPlan;
using Kind = transport::CallStatus::Kind;

TEST(Backoff, GrowsToItsCapAndStartsAgainAfterReset) {
  Backoff b({.initial_s = 1, .factor = 2, .max_s = 5});
  EXPECT_EQ(b.next(), 1);
  EXPECT_EQ(b.next(), 2);
  EXPECT_EQ(b.next(), 4);
  EXPECT_EQ(b.next(), 5);
  EXPECT_EQ(b.next(), 5);
  b.reset();
  EXPECT_EQ(b.next(), 1);
}

// One fake worker serving `dataset`, and a scheduler for `batches` batches of 8.
struct Rig {
  explicit Rig(uint64_t batches = 20, double batch_timeout_s = 10)
      : dataset(data::make_dataset(testing::small_data())),
        sampler(dataset->info().size, 8, 0),
        scheduler([this](uint64_t s) { return sampler.request(s); }, {batches, 8, batch_timeout_s}) {}

  std::shared_ptr<FakeWorkerState> worker() {
    auto state = std::make_shared<FakeWorkerState>();
    state->info = testing::describe(*dataset);
    return state;
  }
  std::unique_ptr<WorkerLink> link(const std::string& name, std::shared_ptr<FakeWorkerState> state,
                                   data::DatasetInfo expected) {
    LinkOptions opts{.inflight = 2, .backoff = {.initial_s = 0.01, .factor = 2, .max_s = 0.05}};
    return std::make_unique<WorkerLink>(std::make_unique<FakeWorkerClient>(name, std::move(state), dataset), scheduler,
                                        std::move(expected), opts);
  }
  std::unique_ptr<WorkerLink> link(const std::string& name, std::shared_ptr<FakeWorkerState> state) {
    return link(name, std::move(state), dataset->info());
  }
  // Every batch arrives, in order, equal to one made here.
  void expect_every_batch(uint64_t n) {
    data::BatchMaker local(dataset, nullptr);
    for (uint64_t i = 0; i < n; ++i) {
      auto b = scheduler.next();
      ASSERT_TRUE(b) << "batch " << i;
      ASSERT_EQ(b->sequence, i);
      ASSERT_EQ(b->data, local.make(sampler.request(i)).data) << "batch " << i;
    }
  }

  // Waits (up to 5 s) until source `id` has failed with `words` in its error.
  bool wait_failed(int id, const std::string& words) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    for (;;) {
      const SourceStats s = scheduler.stats()[id];
      if (s.failed && s.error.find(words) != std::string::npos) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(2ms);
    }
  }

  std::shared_ptr<const data::Dataset> dataset;
  data::Sampler sampler;
  Scheduler scheduler;
};

TEST(WorkerLink, ServesEveryBatchWhenNothingFails) {
  Rig rig;
  auto w = rig.worker();
  auto link = rig.link("w", w);
  link->start(false);
  rig.expect_every_batch(20);
  EXPECT_FALSE(rig.scheduler.next());
  link->stop();
  EXPECT_EQ(rig.scheduler.stats()[0].batches, 20u);
  EXPECT_EQ(w->streams, 1);
}

TEST(WorkerLink, ATransientFailureHandsOnItsRequestsAndTheWorkerRejoins) {
  Rig rig;
  auto w = rig.worker();
  w->plans.push_back({3, {Kind::kTransient, "gRPC UNAVAILABLE: worker restarted"}});
  auto link = rig.link("w", w);
  link->start(false);
  // The only source: the scheduler waits for it (may_return) instead of giving up.
  rig.expect_every_batch(20);
  link->stop();
  const auto stats = rig.scheduler.stats();
  EXPECT_FALSE(stats[0].failed);
  EXPECT_EQ(stats[0].rejoins, 1);
  EXPECT_NE(stats[0].error.find("worker restarted"), std::string::npos) << stats[0].error;
  EXPECT_EQ(w->streams, 2);
}

TEST(WorkerLink, AFinalRefusalDropsTheWorkerForGoodAndTheOthersServe) {
  Rig rig;
  auto refusing = rig.worker(), good = rig.worker();
  refusing->plans.push_back({0, {Kind::kFinal, "gRPC PERMISSION_DENIED: this worker belongs to job a"}});
  auto a = rig.link("refusing", refusing), b = rig.link("good", good);
  a->start(false);
  ASSERT_TRUE(rig.wait_failed(0, "PERMISSION_DENIED"));
  b->start(false);  // once the first has failed: the test does not race the two
  rig.expect_every_batch(20);
  a->stop();
  b->stop();
  const auto stats = rig.scheduler.stats();
  EXPECT_TRUE(stats[0].failed);
  EXPECT_NE(stats[0].error.find("PERMISSION_DENIED"), std::string::npos) << stats[0].error;
  EXPECT_EQ(refusing->streams, 1) << "a final refusal is not retried";
  EXPECT_EQ(refusing->health_checks, 0);
}

TEST(WorkerLink, AWorkerThatComesBackServingOtherDataIsAbandoned) {
  Rig rig;
  auto changed = rig.worker(), good = rig.worker();
  changed->plans.push_back({2, {Kind::kTransient, "gRPC UNAVAILABLE: restarted"}});
  changed->info.dataset.fingerprint = "another-dataset";  // what it says once it is back
  auto a = rig.link("changed", changed), b = rig.link("good", good);
  a->start(false);
  // Its two batches, then the break; its next try to come back (after a 10 ms pause)
  // finds the other dataset.
  for (uint64_t i = 0; i < 2; ++i) ASSERT_TRUE(rig.scheduler.next());
  ASSERT_TRUE(rig.wait_failed(0, "other data")) << rig.scheduler.stats()[0].error;
  b->start(false);
  for (uint64_t i = 2; i < 20; ++i) ASSERT_EQ(rig.scheduler.next()->sequence, i);
  a->stop();
  b->stop();
  const auto stats = rig.scheduler.stats();
  EXPECT_TRUE(stats[0].failed);
  EXPECT_EQ(stats[0].rejoins, 0);
  EXPECT_NE(stats[0].error.find("another-dataset"), std::string::npos) << stats[0].error;
  EXPECT_EQ(changed->streams, 1);
}

TEST(WorkerLink, AWorkerAbsentAtStartJoinsOnceItAnswers) {
  Rig rig;
  auto late = rig.worker();
  late->healthy = false;
  auto link = rig.link("late", late);
  link->start(/*absent=*/true);
  auto first = std::async(std::launch::async, [&] { return rig.scheduler.next(); });
  EXPECT_EQ(first.wait_for(100ms), std::future_status::timeout) << "a batch from a worker that does not answer";
  {
    std::lock_guard lock(late->mu);
    late->healthy = true;
  }
  ASSERT_EQ(first.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(first.get()->sequence, 0u);
  for (uint64_t i = 1; i < 20; ++i) ASSERT_EQ(rig.scheduler.next()->sequence, i);
  link->stop();
  EXPECT_GE(late->health_checks, 2);
  EXPECT_EQ(rig.scheduler.stats()[0].rejoins, 0) << "its first join is not a rejoin";
}

TEST(WorkerLink, AMalformedBatchDropsTheWorker) {
  Rig rig;
  auto bad = rig.worker(), good = rig.worker();
  data::DatasetInfo expected = rig.dataset->info();
  expected.num_classes = 1;  // the worker's labels now fall outside
  auto a = rig.link("bad", bad, expected), b = rig.link("good", good);
  a->start(false);
  ASSERT_TRUE(rig.wait_failed(0, "malformed batch"));
  b->start(false);
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(rig.scheduler.next());
  a->stop();
  b->stop();
  const auto stats = rig.scheduler.stats();
  EXPECT_TRUE(stats[0].failed);
  EXPECT_NE(stats[0].error.find("malformed batch"), std::string::npos) << stats[0].error;
  EXPECT_EQ(bad->streams, 1);
}

TEST(WorkerLink, StopEndsABackoffPauseAtOnce) {
  Rig rig;
  auto gone = rig.worker();
  gone->healthy = false;
  LinkOptions opts{.inflight = 2, .backoff = {.initial_s = 30, .factor = 2, .max_s = 30}};
  WorkerLink link(std::make_unique<FakeWorkerClient>("gone", gone, rig.dataset), rig.scheduler, rig.dataset->info(),
                  opts);
  link.start(/*absent=*/true);
  std::this_thread::sleep_for(50ms);
  const auto start = std::chrono::steady_clock::now();
  link.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(gone->health_checks, 0) << "still in its first 30 s pause";
}

TEST(WorkerLink, IdentityProblemNamesBothDatasets) {
  auto ds = data::make_dataset(testing::small_data());
  transport::WorkerInfo w = testing::describe(*ds);
  EXPECT_EQ(identity_problem(w, ds->info()), "");
  w.dataset.fingerprint = "ffff";
  w.dataset.size = 7;
  const std::string problem = identity_problem(w, ds->info());
  EXPECT_NE(problem.find("ffff"), std::string::npos) << problem;
  EXPECT_NE(problem.find("7 samples"), std::string::npos) << problem;
  EXPECT_NE(problem.find(ds->info().fingerprint), std::string::npos) << problem;
}

}  // namespace
}  // namespace tandem::feed
