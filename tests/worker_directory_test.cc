// Where a feed's workers come from while it runs (feed::WorkerDirectory, issue 37): a
// DNS name re-resolved through an injected resolver whose answer changes, a watch file
// re-read when it changes, and a RankFeed (fake workers) that takes a worker the name
// gains and lets go of one it loses, with every batch delivered once, in order.
#include "tandem/feed/worker_directory.h"

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "fake_worker_client.h"
#include "process_helpers.h"
#include "tandem/common/error.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/rank_feed.h"
#include "worker_fixture.h"

namespace tandem::feed {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Strings = std::vector<std::string>;

// A resolver whose answer the test changes; a lookup of an empty answer fails.
struct FakeDns {
  std::mutex mu;
  Strings answer;
  cluster::Resolver resolver() {
    return [this](const std::string& name, double) {
      std::lock_guard lock(mu);
      if (answer.empty()) throw NetworkError("could not resolve host \"" + name + "\"");
      return answer;
    };
  }
  void set(Strings a) {
    std::lock_guard lock(mu);
    answer = std::move(a);
  }
};

DirectoryOptions named(FakeDns& dns) {
  DirectoryOptions o;
  o.names = {{"workers.svc", 6000}};
  o.resolve = dns.resolver();
  o.resolve_every_s = 5;
  return o;
}

void write_file(const fs::path& path, const std::string& text) {
  const fs::path next = path.string() + ".new";
  std::ofstream(next) << text;
  fs::rename(next, path);  // as a sidecar should: the reader never sees half a file
}

TEST(WorkerDirectory, ANameIsResolvedAgainAndAFailedLookupKeepsItsLastAnswer) {
  FakeDns dns;
  dns.set({"10.0.0.1"});
  WorkerDirectory d(named(dns), 6000);
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(d.changes());
  EXPECT_EQ(d.current(t0), Strings{"10.0.0.1:6000"});
  dns.set({"10.0.0.1", "10.0.0.2"});
  EXPECT_EQ(d.current(t0 + 1s), Strings{"10.0.0.1:6000"}) << "asked again before resolve_every_s";
  EXPECT_EQ(d.current(t0 + 6s), (Strings{"10.0.0.1:6000", "10.0.0.2:6000"}));
  dns.set({});  // a glitch: the pool stays as it was
  EXPECT_EQ(d.current(t0 + 12s), (Strings{"10.0.0.1:6000", "10.0.0.2:6000"}));
  dns.set({"10.0.0.2"});
  EXPECT_EQ(d.current(t0 + 18s), Strings{"10.0.0.2:6000"});
}

TEST(WorkerDirectory, TheWatchFileIsReadAgainWhenItChangesAndABadLineKeepsTheLastList) {
  const fs::path dir = testing::fresh_dir("watch-file");
  const fs::path file = dir / "workers";
  DirectoryOptions o;
  o.fixed = {"10.1.1.1:7000"};
  o.watch_file = file.string();
  EXPECT_THROW(WorkerDirectory(o, 6000), ConfigError) << "a run starts from a readable list";
  write_file(file, "# the data workers\n127.0.0.1:6001\n\n");
  WorkerDirectory d(o, 6000);
  EXPECT_EQ(d.current(), (Strings{"10.1.1.1:7000", "127.0.0.1:6001"}));
  write_file(file, "127.0.0.1:6001\nworker-b  # port 6000\n");
  EXPECT_EQ(d.current(), (Strings{"10.1.1.1:7000", "127.0.0.1:6001", "worker-b:6000"}));
  write_file(file, "127.0.0.1:6001 worker-b\n");
  EXPECT_EQ(d.current(), (Strings{"10.1.1.1:7000", "127.0.0.1:6001", "worker-b:6000"})) << "kept while it is bad";
  write_file(file, "");
  EXPECT_EQ(d.current(), (Strings{"10.1.1.1:7000", "127.0.0.1:6001", "worker-b:6000"})) << "maybe half written";
  EXPECT_EQ(d.current(), Strings{"10.1.1.1:7000"}) << "empty on the second read too";
  try {
    read_watch_file((dir / "bad").string(), 6000);
    ADD_FAILURE() << "an unreadable file was read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("one host:port a line"), std::string::npos) << e.what();
  }
}

// What a watch file cannot hold (the hostile run's): a line that is not an address (an
// escape sequence, an unclosed bracket, a 100 MB line), and a path that is not a file (a
// directory, /dev/zero): each one error naming it, never an address or an empty list.
TEST(WorkerDirectory, AWatchFileHoldsAddressesOnlyAndMustBeAFile) {
  const fs::path dir = testing::fresh_dir("watch-file-bad");
  const fs::path file = dir / "workers";
  for (const std::string bad : {std::string("worker-\x1b[31mred:6000"), std::string("[::1"), std::string("host:99999"),
                                std::string(400, 'a') + ":6000"}) {
    write_file(file, "127.0.0.1:6001\n" + bad + "\n");
    try {
      read_watch_file(file.string(), 6000);
      ADD_FAILURE() << "taken as an address: " << bad.substr(0, 40);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("line 2"), std::string::npos) << what;
      EXPECT_EQ(what.find('\x1b'), std::string::npos) << "an escape sequence reached the message";
    }
  }
  write_file(file, "[fd00::1]:6000\n[::1]\ncpu-1.example_net:7000\n");
  EXPECT_EQ(read_watch_file(file.string(), 6000), (Strings{"[fd00::1]:6000", "[::1]:6000", "cpu-1.example_net:7000"}));
  for (const std::string not_a_file : {dir.string(), std::string("/dev/zero")}) {
    try {
      read_watch_file(not_a_file, 6000);
      ADD_FAILURE() << not_a_file << " was read";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
    }
  }
}

// A feed whose workers are a DNS name: a worker the name gains joins and serves; one it
// loses leaves (not failed, not retried); the batches come once each, in order.
TEST(WorkerDirectory, AFeedTakesTheWorkersANameGainsAndLetsGoOfThoseItLoses) {
  const auto dataset = data::make_dataset(testing::small_data());
  std::map<std::string, std::shared_ptr<testing::FakeWorkerState>> states;
  for (const std::string t : {"10.0.0.1:6000", "10.0.0.2:6000"}) {
    states[t] = std::make_shared<testing::FakeWorkerState>();
    states[t]->info = testing::describe(*dataset, t);
  }
  FakeDns dns;
  dns.set({"10.0.0.1"});
  DirectoryOptions d = named(dns);
  d.resolve_every_s = 0.05;
  FeedOptions o;
  o.data = testing::small_data();
  o.batch_size = 8;
  o.batch_timeout_s = 10;
  o.directory = std::make_shared<WorkerDirectory>(d, 6000);
  o.directory_every_s = 0.05;
  o.workers = o.directory->current();
  o.connect = [&](const std::string& target) {
    return std::make_unique<testing::FakeWorkerClient>(target, states.at(target), dataset);
  };
  const std::atomic<bool> stop{false};
  RankFeed feed(o, stop);
  feed.start(100000, 0, 0);
  uint64_t expected = 0;
  auto take = [&](int n) {
    for (int i = 0; i < n; ++i) {
      const auto b = feed.next();
      ASSERT_TRUE(b);
      ASSERT_EQ(b->sequence, expected++);
    }
  };
  auto stats_of = [&](const std::string& name) {
    for (const SourceStats& s : feed.scheduler().stats()) {
      if (s.name == name) return s;
    }
    return SourceStats{};
  };
  take(20);
  dns.set({"10.0.0.1", "10.0.0.2"});
  for (auto deadline = Clock::now() + 20s; stats_of("10.0.0.2:6000").batches == 0 && Clock::now() < deadline;) take(1);
  EXPECT_GT(stats_of("10.0.0.2:6000").batches, 0u) << "the worker the name gained never served";
  dns.set({"10.0.0.2"});
  for (auto deadline = Clock::now() + 20s; stats_of("10.0.0.1:6000").left.empty() && Clock::now() < deadline;) take(1);
  const SourceStats gone = stats_of("10.0.0.1:6000");
  EXPECT_FALSE(gone.left.empty()) << "the worker the name lost never left";
  EXPECT_FALSE(gone.failed) << gone.error;
  const uint64_t before = stats_of("10.0.0.2:6000").batches;
  take(50);  // the rest come from the other (all but what the one that left still held), in order
  // (less what the one that left still held: its window and the batches ready ahead)
  EXPECT_GE(stats_of("10.0.0.2:6000").batches, before + 50 - 4 - 16);
  feed.close();
}

// A worker flapping in and out of the watch file, under two spellings (issue 51: 40 flips
// listed it 8 times in the summary, each relist a new link, source and connection; three
// spellings were three links) stays one link, one connection and one source, which
// rejoins each time it is listed again; every batch comes once, in order.
TEST(WorkerDirectory, AWorkerFlappingInTheWatchFileKeepsOneLinkAndOneSource) {
  const auto dataset = data::make_dataset(testing::small_data());
  const std::string a = "127.0.0.1:6001", b = "127.0.0.1:6002";
  std::map<std::string, std::shared_ptr<testing::FakeWorkerState>> states;
  for (const std::string& t : {a, b}) {
    states[t] = std::make_shared<testing::FakeWorkerState>();
    states[t]->info = testing::describe(*dataset, t);
  }
  const fs::path file = testing::fresh_dir("flapping") / "workers";
  write_file(file, a + "\n");
  DirectoryOptions d;
  d.watch_file = file.string();
  FeedOptions o;
  o.data = testing::small_data();
  o.batch_size = 8;
  o.batch_timeout_s = 20;
  o.directory = std::make_shared<WorkerDirectory>(d, 6000);
  o.directory_every_s = 0.02;
  o.workers = o.directory->current();
  o.resolve = [](const std::string& host, double) { return Strings{host == "localhost" ? "127.0.0.1" : host}; };
  std::mutex mu;
  std::map<std::string, int> connects;  // by identity
  o.connect = [&](const std::string& target) {
    const std::string id = target == "localhost:6002" ? b : target;
    std::lock_guard lock(mu);
    ++connects[id];
    return std::make_unique<testing::FakeWorkerClient>(target, states.at(id), dataset);
  };
  const std::atomic<bool> stop{false};
  RankFeed feed(o, stop);
  feed.start(1000000, 0, 0);
  uint64_t expected = 0;
  auto take_until = [&](const std::function<bool()>& done, const std::string& what) {
    for (auto deadline = Clock::now() + 20s; !done();) {
      ASSERT_LT(Clock::now(), deadline) << what;
      const auto batch = feed.next();
      ASSERT_TRUE(batch);
      ASSERT_EQ(batch->sequence, expected++);
    }
  };
  auto stats_of_b = [&] {
    SourceStats found;
    for (const SourceStats& s : feed.scheduler().stats()) {
      if (s.name == b || s.name == "localhost:6002") found = s;
    }
    return found;
  };
  constexpr int kFlips = 6;
  for (int flip = 0; flip < kFlips; ++flip) {
    const uint64_t rejoins = stats_of_b().rejoins;
    write_file(file, a + "\n" + (flip % 2 ? "localhost:6002" : b) + "\n");
    take_until(
        [&] {
          const SourceStats s = stats_of_b();  // taken back (not failed: retried) and serving
          return s.left.empty() && !s.failed && (flip == 0 ? s.batches > 0 : s.rejoins > rejoins);
        },
        "B never served");
    write_file(file, a + "\n");
    take_until([&] { return !stats_of_b().left.empty(); }, "B never left");
  }
  feed.close();
  EXPECT_EQ(feed.workers().size(), 2u);
  EXPECT_EQ(feed.scheduler().stats().size(), 2u) << "one source per worker";
  EXPECT_EQ(connects[b], 1) << "one client (one connection) for B, whatever it was called";
  EXPECT_EQ(connects[a], 1);
  EXPECT_GE(stats_of_b().rejoins, kFlips - 1);
  EXPECT_FALSE(stats_of_b().failed) << stats_of_b().error;
}

}  // namespace
}  // namespace tandem::feed
