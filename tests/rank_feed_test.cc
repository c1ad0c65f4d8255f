// The owner of a rank's feed (feed::RankFeed) with fake workers: learning the dataset,
// checking every worker, starting without a late one, interrupting, releasing.
#include "tandem/feed/rank_feed.h"

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "fake_worker_client.h"
#include "tandem/common/error.h"
#include "tandem/data/sources/image_folder.h"
#include "tandem/data/sources/source_kinds.h"
#include "worker_fixture.h"

namespace tandem::feed {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorkerClient;
using testing::FakeWorkerState;
using Kind = transport::CallStatus::Kind;

// Fake workers by name, all serving the small synthetic set.
struct Workers {
  Workers() : dataset(data::make_dataset(testing::small_data())) {}
  std::shared_ptr<FakeWorkerState> add(const std::string& name, bool healthy = true) {
    auto s = std::make_shared<FakeWorkerState>();
    s->info = testing::describe(*dataset, name + "-host");
    s->healthy = healthy;
    states[name] = s;
    return s;
  }
  FeedOptions options() {
    FeedOptions o;
    o.data = testing::small_data();
    for (const auto& [name, _] : states) o.workers.push_back(name);
    o.batch_size = 8;
    o.connect_timeout_s = 10;
    o.batch_timeout_s = 10;
    o.connect = [this](const std::string& target) {
      return std::make_unique<FakeWorkerClient>(target, states.at(target), dataset);
    };
    return o;
  }
  std::shared_ptr<const data::Dataset> dataset;
  std::map<std::string, std::shared_ptr<FakeWorkerState>> states;
};

// How a worker serving an image folder at image size 16 (seed 0) describes its dataset.
std::string image_folder_worker() {
  DataOptions d;
  d.data = "imagefolder";
  d.image_size = 16;
  return "imagefolder/v1 files=0123456789abcdef n=400 size=400 seed=0 pipeline=" + data::image_folder_pipeline(data::image_options(d)) +
         " max_pixels=" + std::to_string(d.max_image_pixels);
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(RankFeed, LearnsTheDatasetFromTheFirstWorkerThatAnswers) {
  Workers w;
  w.add("a", /*healthy=*/false);
  w.add("b")->info.dataset.description = image_folder_worker();
  FeedOptions o = w.options();
  o.data.data = "imagefolder:/nonexistent/tandem-test-data";  // no copy on this host
  const std::atomic<bool> stop{false};
  RankFeed feed(o, stop);
  EXPECT_EQ(feed.local_dataset(), nullptr);
  EXPECT_EQ(feed.info().fingerprint, w.dataset->info().fingerprint);
  EXPECT_EQ(feed.info().size, w.dataset->info().size);
  feed.start(10, 0, 0);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(feed.next()->sequence, i);
  EXPECT_FALSE(feed.next());
  feed.close();
  EXPECT_EQ(feed.scheduler().stats()[1].batches, 10u) << "b served every batch";
}

TEST(RankFeed, ALearntDatasetWhoseSettingsDifferFromOursIsRefusedByName) {
  const auto refusal = [](const std::function<void(DataOptions&)>& set) {
    Workers w;
    w.add("b")->info.dataset.description = image_folder_worker();
    FeedOptions o = w.options();
    o.data.data = "imagefolder:/nonexistent/tandem-test-data";
    set(o.data);
    const std::atomic<bool> stop{false};
    return error_of([&] { RankFeed feed(o, stop); });
  };
  EXPECT_EQ(refusal([](DataOptions&) {}), "") << "settings left at their defaults take the worker's";
  EXPECT_EQ(refusal([](DataOptions& d) { d.image_size = 16; }), "");
  EXPECT_EQ(refusal([](DataOptions& d) { d.seed = 7; }),
            "data worker b (b-host) serves seed 0, this trainer expects 7 (--seed): give every host the same data "
            "settings");
  const std::string e = refusal([](DataOptions& d) { d.image_size = 24; });
  EXPECT_NE(e.find("serves pipeline ...,random_resized_crop(size=16,"), std::string::npos) << e;
  EXPECT_NE(e.find("this trainer expects ...,random_resized_crop(size=24,"), std::string::npos) << e;
  EXPECT_NE(refusal([](DataOptions& d) { d.data = "mnist:/nonexistent/tandem-test-data"; })
                .find("serves dataset imagefolder/v1, this trainer expects mnist/v1 (--data)"),
            std::string::npos);
}

TEST(RankFeed, RefusesAWorkerServingAnotherDatasetByName) {
  Workers w;
  w.add("odd")->info.dataset.fingerprint = "0ther";
  const std::atomic<bool> stop{false};
  RankFeed feed(w.options(), stop);
  const std::string e = error_of([&] { feed.start(10, 0, 0); });
  EXPECT_NE(e.find("data worker odd (odd-host)"), std::string::npos) << e;
  EXPECT_NE(e.find("0ther"), std::string::npos) << e;
  EXPECT_NE(e.find("same data settings"), std::string::npos) << e;
}

TEST(RankFeed, StartsWithoutAWorkerThatDoesNotAnswerYetAndTakesItWhenItDoes) {
  Workers w;
  w.add("a");
  auto late = w.add("late", /*healthy=*/false);
  const std::atomic<bool> stop{false};
  RankFeed feed(w.options(), stop);
  feed.start(1000, 0, 0);
  ASSERT_TRUE(feed.next());
  {
    std::lock_guard lock(late->mu);
    late->healthy = true;
  }
  // It is taken back after its first backoff pause, whether or not batches are asked for.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (feed.scheduler().stats()[1].failed && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_FALSE(feed.scheduler().stats()[1].failed) << "the late worker never joined";
  EXPECT_EQ(feed.scheduler().stats()[1].rejoins, 0) << "a first join is not a rejoin";
  feed.close();
}

// Twenty listed workers that never answer (each health check waits out its 1 s) and one
// that does: the feed starts as soon as the live one answers, not after a second per
// silent one (the hostile run: 20 dead addresses, 20.1 s; 300 in a watch file, none in 150 s).
TEST(RankFeed, SilentWorkersAreCheckedAtOnceNotOneAfterAnother) {
  Workers w;
  w.add("live");
  for (int i = 0; i < 20; ++i) w.add("silent-" + std::to_string(i))->silent = true;
  const std::atomic<bool> stop{false};
  RankFeed feed(w.options(), stop);
  const auto t0 = std::chrono::steady_clock::now();
  feed.start(1000, 0, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "one health check after another";
  ASSERT_TRUE(feed.next());
  feed.close();
}

TEST(RankFeed, InterruptEndsAWaitForABatchAtOnce) {
  Workers w;
  auto flaky = w.add("flaky");
  flaky->plans.push_back({0, {Kind::kTransient, "gRPC UNAVAILABLE: gone"}});
  const std::atomic<bool> stop{false};
  RankFeed feed(w.options(), stop);
  feed.start(10, 0, 0);
  {
    std::lock_guard lock(flaky->mu);
    flaky->healthy = false;  // and it does not come back
  }
  auto waiting = std::async(std::launch::async, [&] { return feed.next(); });
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout);
  feed.interrupt();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(waiting.get());
}

TEST(RankFeed, NoWorkerAnsweringIsAnErrorNamingTheSetting) {
  Workers w;
  w.add("a", false);
  FeedOptions o = w.options();
  o.connect_timeout_s = 0.2;
  const std::atomic<bool> stop{false};
  RankFeed feed(o, stop);
  const std::string e = error_of([&] { feed.start(10, 0, 0); });
  EXPECT_NE(e.find("no data worker answered within --connect-timeout"), std::string::npos) << e;
  EXPECT_NE(e.find("e.g. a"), std::string::npos) << e;
  o.data.data = "imagefolder:/nonexistent/tandem-test-data";  // and when learning the dataset
  EXPECT_NE(error_of([&] { RankFeed learning(o, stop); }).find("--connect-timeout"), std::string::npos);
}

TEST(RankFeed, AStopEndsTheWaitForWorkers) {
  Workers w;
  w.add("a", false);
  std::atomic<bool> stop{false};
  RankFeed feed(w.options(), stop);
  auto starting = std::async(std::launch::async, [&] { feed.start(10, 0, 0); });
  EXPECT_EQ(starting.wait_for(200ms), std::future_status::timeout);
  stop = true;
  ASSERT_EQ(starting.wait_for(5s), std::future_status::ready);
  EXPECT_THROW(starting.get(), Interrupted);
}

TEST(RankFeed, ReleaseTellsEveryWorkerOnce) {
  Workers w;
  auto a = w.add("a"), b = w.add("b", false);
  const std::atomic<bool> stop{false};
  RankFeed feed(w.options(), stop);
  EXPECT_EQ(feed.release_workers("training finished"), 2);
  EXPECT_EQ(a->shutdowns, 1);
  EXPECT_EQ(b->shutdowns, 1);
}

// One worker listed under two spellings (a name and its address) is one link: one stream,
// one source, one Shutdown at the end (issue 51).
TEST(RankFeed, OneWorkerUnderTwoSpellingsIsOneLink) {
  Workers w;
  auto one = w.add("127.0.0.1:6001");
  w.states["localhost:6001"] = one;
  FeedOptions o = w.options();
  o.workers = {"127.0.0.1:6001", "localhost:6001", "[::ffff:127.0.0.1]:6001"};
  w.states[o.workers[2]] = one;
  o.resolve = [](const std::string& host, double) { return std::vector<std::string>{host == "localhost" ? "127.0.0.1" : host}; };
  const std::atomic<bool> stop{false};
  RankFeed feed(o, stop);
  feed.start(20, 0, 0);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(feed.next());
  EXPECT_EQ(feed.workers().size(), 1u);
  EXPECT_EQ(feed.scheduler().stats().size(), 1u);
  EXPECT_EQ(feed.release_workers("training finished"), 1);
  feed.close();
  std::lock_guard lock(one->mu);
  EXPECT_EQ(one->streams, 1);
  EXPECT_EQ(one->shutdowns, 1);
}

TEST(RankFeed, SettingsThatCannotWorkAreConfigErrors) {
  Workers w;
  w.add("a");
  const std::atomic<bool> stop{false};
  FeedOptions bad_rank = w.options();
  bad_rank.rank = 2;
  bad_rank.world = 2;
  EXPECT_NE(error_of([&] { RankFeed f(bad_rank, stop); }).find("0 <= rank < world"), std::string::npos);
  FeedOptions none = w.options();
  none.workers.clear();
  RankFeed feed(none, stop);
  EXPECT_NE(error_of([&] { feed.start(10, 0, 0); }).find("no data source"), std::string::npos);
}

}  // namespace
}  // namespace tandem::feed
