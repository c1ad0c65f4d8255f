#include "tandem/feed/sample_audit.h"
#include "tandem/feed/scheduler.h"
#include "tandem/common/error.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <utility>
#include <vector>
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
  b.indices = {r.indices.begin(), r.indices.end()};
  b.data = data::Buffer(4);
  std::memset(b.data.data(), 0, b.data.size());  // a copy of one batch has the same bytes
  return b;
}

// A fake source: serves every request it acquires after `delay`.
std::thread serve(Scheduler& s, int id, std::chrono::milliseconds delay, std::atomic<int>* served = nullptr) {
  return std::thread([&s, id, delay, served] {
    while (auto r = s.acquire(id)) {
      std::this_thread::sleep_for(delay);
      if (served) ++*served;
      s.complete(id, batch_for(*r));
    }
  });
}

TEST(Scheduler, DeliversInSequenceOrderWhateverTheCompletionOrder) {
  Scheduler s(request_for, {8, 8, 10});
  const int id = s.add_source("reverse", 8);
  std::vector<data::BatchRequest> held;
  for (int i = 0; i < 8; ++i) held.push_back(*s.acquire(id));
  for (auto it = held.rbegin(); it != held.rend(); ++it) s.complete(id, batch_for(*it));
  for (uint64_t i = 0; i < 8; ++i) {
    auto b = s.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->sequence, i);
  }
  EXPECT_FALSE(s.next());
  EXPECT_FALSE(s.acquire(id)) << "no work after the last batch";
}

TEST(Scheduler, PrefetchBoundsRequestsAheadOfTheConsumer) {
  Scheduler s(request_for, {100, 3, 10});
  const int id = s.add_source("greedy", 50);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.acquire(id));
  // Still waiting at a deadline: the scheduler holds the fourth request back.
  auto fourth = std::async(std::launch::async, [&] { return s.acquire(id).has_value(); });
  EXPECT_EQ(fourth.wait_for(100ms), std::future_status::timeout) << "a fourth request while three are undelivered";
  s.close();
  EXPECT_FALSE(fourth.get()) << "closing releases the waiter empty-handed";
}

TEST(Scheduler, WindowLimitsOneSource) {
  Scheduler s(request_for, {100, 50, 10});
  const int id = s.add_source("small", 2);
  ASSERT_TRUE(s.acquire(id));
  ASSERT_TRUE(s.acquire(id));
  auto third = std::async(std::launch::async, [&] { return s.acquire(id).has_value(); });
  EXPECT_EQ(third.wait_for(100ms), std::future_status::timeout) << "a third request beyond the window of 2";
  s.complete(id, batch_for(request_for(0)));
  EXPECT_TRUE(third.get()) << "room again once one completes";
}

TEST(Scheduler, FasterSourceServesProportionallyMore) {
  const uint64_t total = 120;
  Scheduler s(request_for, {total, 16, 30});
  const int fast = s.add_source("fast", 2), slow = s.add_source("slow", 2);
  std::thread a = serve(s, fast, 5ms), b = serve(s, slow, 15ms);
  for (uint64_t i = 0; i < total; ++i) ASSERT_TRUE(s.next());
  s.close();
  a.join();
  b.join();
  const auto stats = s.stats();
  const double share = double(stats[fast].batches) / total;
  EXPECT_NEAR(share, 0.75, 0.15) << "fast " << stats[fast].batches << " slow " << stats[slow].batches;
  EXPECT_EQ(stats[fast].batches + stats[slow].batches, total);
}

TEST(Scheduler, AFailedSourcesRequestsGoToTheOthers) {
  Scheduler s(request_for, {20, 8, 10});
  const int doomed = s.add_source("doomed", 4), healthy = s.add_source("healthy", 4);
  std::vector<data::BatchRequest> lost;
  for (int i = 0; i < 4; ++i) lost.push_back(*s.acquire(doomed));
  s.fail(doomed, "connection reset");
  EXPECT_FALSE(s.acquire(doomed));
  s.complete(doomed, batch_for(lost[0]));  // a late completion from the dead source is ignored
  std::thread t = serve(s, healthy, 0ms);
  for (uint64_t i = 0; i < 20; ++i) {
    auto b = s.next();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->sequence, i);
    EXPECT_EQ(b->source, healthy);
  }
  t.join();
  const auto stats = s.stats();
  EXPECT_TRUE(stats[doomed].failed);
  EXPECT_EQ(stats[doomed].error, "connection reset");
  EXPECT_EQ(stats[healthy].batches, 20u);
}

TEST(Scheduler, EveryoneFailedIsAnErrorNamingThem) {
  Scheduler s(request_for, {5, 4, 10});
  const int a = s.add_source("worker-a:6000", 2), b = s.add_source("worker-b:6000", 2);
  s.fail(a, "refused");
  s.fail(b, "reset");
  try {
    s.next();
    FAIL();
  } catch (const NetworkError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("worker-a:6000: refused"), std::string::npos) << what;
    EXPECT_NE(what.find("worker-b:6000: reset"), std::string::npos) << what;
  }
}

TEST(Scheduler, NextHasADeadline) {
  Scheduler s(request_for, {5, 4, 0.2});
  s.add_source("silent", 2);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(s.next(), NetworkError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_GE(s.wait_seconds(), 0.19);
}

TEST(Scheduler, CloseReleasesEveryWaiter) {
  Scheduler s(request_for, {5, 1, 10});
  const int id = s.add_source("x", 1);
  ASSERT_TRUE(s.acquire(id));
  std::thread producer([&] { EXPECT_FALSE(s.acquire(id)); });
  std::thread consumer([&] { EXPECT_FALSE(s.next()); });
  s.close();  // whether they wait already or arrive after, both get nothing
  producer.join();
  consumer.join();
}

}  // namespace
}  // namespace tandem::feed

namespace tandem::feed {
namespace {

// Sources start pulling as soon as they are added; adding more must not disturb them.
TEST(Scheduler, SourcesAddedWhileOthersWaitKeepWorking) {
  Scheduler s(request_for, {400, 16, 10});
  const int first = s.add_source("first", 2);
  std::atomic<int> served{0};
  std::thread t = serve(s, first, std::chrono::milliseconds(1), &served);
  std::vector<int> more;
  for (int i = 0; i < 50; ++i) more.push_back(s.add_source("extra" + std::to_string(i), 1));
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(s.next()) << "stalled at " << i;
  s.close();
  t.join();
  EXPECT_EQ(served, 400);
}

}  // namespace
}  // namespace tandem::feed

namespace tandem::feed {
namespace {

data::Batch made_from(const data::Sampler& plan, uint64_t seq) {
  const data::BatchRequest r = plan.request(seq);
  data::Batch b;
  b.sequence = seq;
  b.epoch = r.epoch;
  b.indices = r.indices;
  return b;
}

TEST(SampleAudit, CountsMissingDuplicatedAndUnplannedSamples) {
  data::Sampler plan(40, 4, 0);  // 10 batches an epoch
  SampleAudit clean(plan, plan.position(0));
  for (uint64_t s = 0; s < 15; ++s) clean.record(made_from(plan, s));
  clean.finish(15);
  auto r = clean.report();
  EXPECT_EQ(r["planned"], 60);
  EXPECT_EQ(r["consumed"], 60);
  EXPECT_EQ(r["missing"], 0);
  EXPECT_EQ(r["duplicated"], 0);
  EXPECT_EQ(r["unplanned"], 0);
  ASSERT_EQ(r["epochs"].size(), 2u);
  EXPECT_EQ(r["epochs"][0]["planned"], 40);

  SampleAudit broken(plan, plan.position(0));
  broken.record(made_from(plan, 0));
  broken.record(made_from(plan, 0));  // delivered twice
  data::Batch wrong = made_from(plan, 2);  // batch 1 never arrives
  wrong.indices[0] = made_from(plan, 5).indices[0];  // made from a sample of another batch
  broken.record(wrong);
  broken.finish(3);
  r = broken.report();
  EXPECT_EQ(r["duplicated"], 4);
  EXPECT_EQ(r["unplanned"], 1);
  EXPECT_EQ(r["missing"], 5) << r.dump(2);  // all of batch 1, and the replaced sample of batch 2

  // A stop cut the last step short: its batch was taken, never trained.
  SampleAudit stopped(plan, plan.position(0));
  for (uint64_t s = 0; s < 5; ++s) stopped.record(made_from(plan, s));
  stopped.finish(4);
  r = stopped.report();
  EXPECT_EQ(r["consumed"], 16) << r.dump(2);
  EXPECT_EQ(r["planned"], 16) << r.dump(2);
}

// 4,800 samples, 16 a rank, 2 epochs; a run on `from_world` ranks checkpointed at
// `step`, resumed on `world` ranks to the end of epoch 1, anchored at the checkpoint's
// place as the trainer anchors it. The merged audit of the second run.
nlohmann::json resumed_audit(int from_world, int world, uint64_t step) {
  const data::DataPosition from = data::position_at(step, 4800, 16, from_world);
  std::vector<nlohmann::json> reports;
  for (int rank = 0; rank < world; ++rank) {
    data::Sampler plan(4800, 16, 7, rank, world);
    plan.anchor(data::anchor_at(step, from));
    SampleAudit audit(plan, plan.position(step));
    for (uint64_t s = step; s < plan.epoch_start(2); ++s) audit.record(made_from(plan, s));
    audit.finish(plan.epoch_start(2));
    reports.push_back(audit.report());
  }
  return SampleAudit::merge(reports);
}

TEST(SampleAudit, AResumeAtAnotherWorldSizeContinuesTheEpochExactly) {
  // 2 -> 3 ranks at step 193 (epoch 1, sample 1376): the rest of epoch 1 in 71 global
  // batches of 48 (3,408 samples), its last 16 the dropped tail; nothing skipped or repeated.
  nlohmann::json r = resumed_audit(2, 3, 193);
  ASSERT_EQ(r["epochs"].size(), 1u) << r.dump();
  EXPECT_EQ(r["epochs"][0]["epoch"], 1);
  EXPECT_EQ(r["planned"], 3408) << r.dump();
  EXPECT_EQ(r["consumed"], 3408);
  EXPECT_EQ(r["dropped"], 16);
  EXPECT_EQ(r["missing"], 0) << r.dump();
  EXPECT_EQ(r["duplicated"], 0);
  EXPECT_EQ(r["unplanned"], 0);
  // 3 -> 2 ranks at step 93 (epoch 0, sample 4464): the last 336 of epoch 0, then epoch 1 whole.
  r = resumed_audit(3, 2, 93);
  ASSERT_EQ(r["epochs"].size(), 2u) << r.dump();
  EXPECT_EQ(r["epochs"][0]["planned"], 320) << r.dump();
  EXPECT_EQ(r["epochs"][0]["dropped"], 16) << r.dump();
  EXPECT_EQ(r["epochs"][1]["planned"], 4800);
  EXPECT_EQ(r["missing"], 0);
  EXPECT_EQ(r["duplicated"], 0);
  // 2 -> 1 rank at step 140 (epoch 0, sample 4480): 20 batches of 16, no tail.
  r = resumed_audit(2, 1, 140);
  EXPECT_EQ(r["epochs"][0]["planned"], 320);
  EXPECT_EQ(r["dropped"], 0);
  EXPECT_EQ(r["missing"] .get<uint64_t>() + r["duplicated"].get<uint64_t>() + r["unplanned"].get<uint64_t>(), 0u);
  // The same world size: every sample once, as before anchors.
  r = resumed_audit(2, 2, 193);
  EXPECT_EQ(r["missing"], 0);
  EXPECT_EQ(r["dropped"], 0);
  EXPECT_EQ(r["planned"], r["consumed"]);
}

TEST(SampleAudit, AnAnchorCutsTheRestOfItsEpochAndTheNextAsUsual) {
  const data::DataAnchor a{193, 1, 1376};  // 2 ranks x 16 at step 193
  EXPECT_EQ(data::position_at(193, 4800, 16, 3, a), (data::DataPosition{1, 1376, 3, 16, 4800, 4800}));
  EXPECT_EQ(data::position_at(194, 4800, 16, 3, a).sample, 1376u + 48);
  EXPECT_EQ(data::epoch_start_step(2, 4800, 16, 3, a), 193u + 71);
  EXPECT_EQ(data::position_at(193 + 71, 4800, 16, 3, a), (data::DataPosition{2, 0, 3, 16, 4800, 4800}));
  EXPECT_EQ(data::position_at(193 + 71 + 100 + 3, 4800, 16, 3, a).epoch, 3u);
  EXPECT_EQ(data::anchor_tail(4800, 16, 3, a), 16u);
  // Unanchored, a geometry's anchor at its own position changes nothing.
  const data::DataAnchor same = data::anchor_at(193, data::position_at(193, 4800, 16, 3));
  for (uint64_t s : {193u, 250u, 400u}) {
    EXPECT_EQ(data::position_at(s, 4800, 16, 3, same), data::position_at(s, 4800, 16, 3)) << s;
  }
  // Each rank's slice of an anchored global batch.
  data::Sampler one(4800, 16, 7, 1, 3);
  one.anchor(a);
  const auto order = one.order(1);
  const data::BatchRequest r = one.request(193);
  EXPECT_EQ(r.epoch, 1u);
  EXPECT_EQ(r.indices, std::vector<uint64_t>(order.begin() + 1376 + 16, order.begin() + 1376 + 32));
  EXPECT_EQ(one.rank_of(1, 1376 + 20), 1);
  EXPECT_THROW(one.anchor({0, 0, 4801}), ConfigError);
}

TEST(SampleAudit, AResumeAtAnotherGeometryIsSaidWithBothSizesAndTheBatch) {
  const data::DataPosition two = data::position_at(193, 4800, 16, 2), three = data::position_at(193, 4800, 16, 3);
  const std::string said = resume_shift(two, three);
  for (const char* part : {"2 ranks x 16 (global batch 32)", "3 ranks x 16 (global batch 48)", "epoch 1, sample 1376",
                           "continues epoch 1's order from sample 1376 exactly", "its last 16 samples",
                           "the global batch is 48, not 32", "the learning rate stays as given", "x1.5"}) {
    EXPECT_NE(said.find(part), std::string::npos) << part << " not in: " << said;
  }
  EXPECT_EQ(resume_shift(two, two), "");
  EXPECT_EQ(position_from_json(position_json(three)), three);
  EXPECT_EQ(position_from_json(nlohmann::json::object()), std::nullopt);
}

}  // namespace
}  // namespace tandem::feed

namespace tandem::feed {
namespace {

// A source that makes its requests, but hangs on the first one past 19 until `released`
// (its sequence goes to `stalled`), then answers it passed through `change`.
std::thread stall_once(Scheduler& s, int id, std::shared_future<void> released, std::atomic<int64_t>& stalled,
                       std::function<void(data::Batch&)> change = {}) {
  return std::thread([&s, id, released, &stalled, change] {
    while (auto r = s.acquire(id)) {
      data::Batch b = batch_for(*r);
      if (r->sequence >= 20 && stalled < 0) {
        stalled = static_cast<int64_t>(r->sequence);
        released.wait();
        if (change) change(b);
      }
      std::this_thread::sleep_for(2ms);
      s.complete(id, std::move(b));
    }
  });
}

// Two copies of one batch (a hedged request that both sources answered) that differ: the
// data is not deterministic. Reported with the batch, its samples and both sources; under
// --require-deterministic the next batch is an error.
TEST(Scheduler, TwoCopiesOfAHedgedBatchThatDifferAreReported) {
  for (const bool require : {false, true}) {
    Scheduler s(request_for, {60, 8, /*batch_timeout_s=*/10, 0, require});
    const int stalling = s.add_source("stalling", 2);
    const int healthy = s.add_source("healthy", 2);
    std::promise<void> release;
    const std::shared_future<void> released = release.get_future().share();
    std::atomic<int64_t> stalled{-1};
    // Hangs on one request, then answers it with other bytes.
    std::thread a = stall_once(s, stalling, released, stalled,
                               [](data::Batch& b) { std::memset(b.data.data(), 0xff, b.data.size()); });
    std::thread h = serve(s, healthy, 2ms);
    for (uint64_t i = 0;; ++i) {
      auto batch = s.next();
      ASSERT_TRUE(batch) << i;
      if (static_cast<int64_t>(i) == stalled) break;
    }
    release.set_value();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (s.determinism_problems().empty() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
    const std::vector<std::string> problems = s.determinism_problems();
    ASSERT_EQ(problems.size(), 1u) << require;
    const std::string seq = std::to_string(stalled.load());
    EXPECT_NE(problems[0].find("batch " + seq + " (samples " + seq + ") came from healthy and stalling with different bytes"),
              std::string::npos) << problems[0];
    if (require) {
      EXPECT_THROW(s.next(), DataError);
    } else {
      EXPECT_TRUE(s.next());
    }
    s.close();
    a.join();
    h.join();
  }
}

// Two copies in different wire dtypes (a uint8 worker's and a float32 worker's, the
// hostile run's hedged pair) differ in bytes by design: they are not compared, and
// --require-deterministic does not end the run over them.
TEST(Scheduler, CopiesInAnotherWireDtypeAreNotComparedByTheirBytes) {
  Scheduler s(request_for, {8, 8, 10, 0, /*require_deterministic=*/true});
  const int id = s.add_source("worker", 4);
  for (int i = 0; i < 2; ++i) s.complete(id, batch_for(*s.acquire(id)));
  s.fail(id, "restarted with another --wire-dtype", /*may_return=*/true);
  s.revive(id);
  const auto check = s.acquire(id);
  ASSERT_TRUE(check);
  data::Batch copy = batch_for(*check);
  copy.dtype = copy.dtype == data::DType::kUInt8 ? data::DType::kFloat32 : data::DType::kUInt8;
  std::memset(copy.data.data(), 0xff, copy.data.size());
  s.complete(id, std::move(copy));
  EXPECT_EQ(s.determinism_problems(), std::vector<std::string>{});
  EXPECT_TRUE(s.next());
  s.close();
}

// A source that rejoins first re-makes the latest batch made; a copy with other bytes
// (a worker restarted with code that is not deterministic) is reported, and the same
// bytes are not.
TEST(Scheduler, ARejoiningSourceRemakesTheLatestBatchAndItsCopyIsCompared) {
  for (const bool differs : {false, true}) {
    Scheduler s(request_for, {8, 8, 10});
    const int id = s.add_source("worker", 4);
    for (int i = 0; i < 2; ++i) s.complete(id, batch_for(*s.acquire(id)));
    s.fail(id, "reset", /*may_return=*/true);
    s.revive(id);
    const auto check = s.acquire(id);
    ASSERT_TRUE(check);
    EXPECT_EQ(check->sequence, 1u) << "the rejoined source's first request is the latest batch made";
    data::Batch copy = batch_for(*check);
    if (differs) std::memset(copy.data.data(), 0xff, copy.data.size());
    s.complete(id, std::move(copy));
    const std::vector<std::string> problems = s.determinism_problems();
    ASSERT_EQ(problems.size(), differs ? 1u : 0u);
    if (differs) {
      EXPECT_NE(problems[0].find("batch 1 (samples 1) came from worker before and after it rejoined with different bytes"),
                std::string::npos) << problems[0];
    }
    for (int i = 2; i < 8; ++i) s.complete(id, batch_for(*s.acquire(id)));
    for (uint64_t i = 0; i < 8; ++i) {
      const auto b = s.next();
      ASSERT_TRUE(b);
      EXPECT_EQ(b->sequence, i) << "the check is not delivered";
    }
    EXPECT_FALSE(s.next());
  }
}

// A source that never answers: next() gives up at --batch-timeout, saying it as it was
// given ("0.25 s", not "0.250000 s").
TEST(Scheduler, NoBatchWithinTheBatchTimeoutIsANetworkErrorNamingIt) {
  Scheduler s(request_for, {4, 2, /*batch_timeout_s=*/0.25});
  s.add_source("silent", 1);
  try {
    s.next();
    FAIL() << "a batch came from a source that never answers";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("no batch 0 within --batch-timeout 0.25 s; sources:"), std::string::npos)
        << e.what();
  }
  s.close();
}

// One source stalls on one request (a host that hangs): once the request at the head of
// the line is late by the learned margin, another source makes it too and the loop goes
// on; the stalled source's late answer, if any, is discarded.
TEST(Scheduler, ALateRequestAtTheHeadOfTheLineIsHedgedToAnotherSource) {
  Scheduler s(request_for, {60, 8, /*batch_timeout_s=*/10});
  const int stalling = s.add_source("stalling", 2);
  const int healthy = s.add_source("healthy", 2);
  std::promise<void> release;
  const std::shared_future<void> released = release.get_future().share();
  std::atomic<int64_t> stalled{-1};
  std::thread a = stall_once(s, stalling, released, stalled);  // hangs on one until the test ends
  std::thread b = serve(s, healthy, 2ms);
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < 60; ++i) {
    auto batch = s.next();
    ASSERT_TRUE(batch) << i;
    ASSERT_EQ(batch->sequence, i);
    if (static_cast<int64_t>(i) == stalled) {
      EXPECT_EQ(batch->source, healthy) << "the stalled batch comes from the hedge";
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "the stall was waited out, not hedged";
  ASSERT_GE(stalled.load(), 20) << "the stalling source never took a request past 20";
  EXPECT_GE(s.hedged(), 1u);
  release.set_value();
  s.close();
  a.join();
  b.join();
}

// What a consumer that works `work` per batch saw: each batch's sequence and source, and
// for each request the source `watched` acquired, how far ahead of the next delivery it was.
struct PacedRun {
  std::vector<uint64_t> sequences;
  std::vector<int> sources;
  std::vector<int64_t> watched_lead;
};

PacedRun consume_paced(Scheduler& s, uint64_t total, std::chrono::milliseconds work, int watched,
                       std::chrono::milliseconds watched_delay, const std::vector<std::pair<int, std::chrono::milliseconds>>& others) {
  PacedRun run;
  std::atomic<int64_t> delivered{0};
  std::mutex mu;
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    while (auto r = s.acquire(watched)) {
      {
        std::lock_guard lock(mu);
        run.watched_lead.push_back(static_cast<int64_t>(r->sequence) - delivered.load());
      }
      std::this_thread::sleep_for(watched_delay);
      s.complete(watched, batch_for(*r));
    }
  });
  for (const auto& [id, delay] : others) threads.push_back(serve(s, id, delay));
  for (uint64_t i = 0; i < total; ++i) {
    auto b = s.next();
    if (!b) break;
    run.sequences.push_back(b->sequence);
    run.sources.push_back(b->source);
    delivered = static_cast<int64_t>(i) + 1;
    std::this_thread::sleep_for(work);
  }
  s.close();
  for (auto& t : threads) t.join();
  return run;
}

// The trainer's own two threads beside fast workers: a source that takes longer per batch
// than the prefetch window lasts (150 ms against 8 batches of 10 ms) would stall the loop
// at each of its batches. Once its latency and the loop's pace are known, it is given
// batches beyond the window, due after it finishes; every batch still comes once, in order.
TEST(Scheduler, ASourceSlowerThanTheWindowIsGivenBatchesDueLater) {
  const uint64_t total = 150;
  Scheduler s(request_for, {total, /*prefetch=*/8, 30});
  const int fast = s.add_source("fast", 4), slow = s.add_source("slow", 1);
  const PacedRun run = consume_paced(s, total, 10ms, slow, 150ms, {{fast, 2ms}});
  ASSERT_EQ(run.sequences.size(), total);
  for (uint64_t i = 0; i < total; ++i) ASSERT_EQ(run.sequences[i], i);
  const auto stats = s.stats();
  EXPECT_GE(stats[slow].batches, 3u) << "the slow source still adds batches";
  EXPECT_EQ(stats[fast].batches + stats[slow].batches, total);
  EXPECT_GE(stats[slow].ahead, 2u);
  EXPECT_EQ(stats[fast].ahead, 0u);
  ASSERT_GE(run.watched_lead.size(), 4u);
  // Its first requests are in the line (nothing is known yet); the last ones lie past the window.
  for (size_t i = run.watched_lead.size() - 2; i < run.watched_lead.size(); ++i) {
    EXPECT_GE(run.watched_lead[i], 8) << "request " << i << " of the slow source was within the window";
  }
}

// With no faster source to take the line's batches, a slow source keeps the ordinary order.
TEST(Scheduler, ALoneSlowSourceServesTheLineInOrder) {
  const uint64_t total = 20;
  Scheduler s(request_for, {total, 2, 30});
  const int slow = s.add_source("slow", 1);
  const PacedRun run = consume_paced(s, total, 20ms, slow, 40ms, {});
  ASSERT_EQ(run.sequences.size(), total);
  EXPECT_EQ(s.stats()[slow].ahead, 0u);
  for (const int64_t lead : run.watched_lead) EXPECT_LE(lead, 2);
}

// The calls for sources that fail and come back (what feed::WorkerLink uses): fail with
// may_return, revive, abandon, retire.
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
