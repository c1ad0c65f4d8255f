// Workers that come and go while a trainer runs (issue 37), with real processes on
// loopback: a worker added to --workers-watch joins and takes a share, removed it leaves,
// and a worker drained with SIGTERM (--drain) answers what it accepted and exits 0; in
// both, --audit-samples finds nothing missing or duplicated.
#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using namespace tandem::testing;
using nlohmann::json;

// Workers and a trainer of tiny samples; each training step takes at least 15 ms
// (--emulate-step-ms), so a run lasts long enough for the pool to change under it.
std::string worker_flags(const std::string& extra = "") {
  return "--threads 1 --data synthetic --image-size 16 --term-grace 20 --idle-timeout 120" + extra;
}

std::string trainer_args(const std::string& workers, const fs::path& dir, int steps) {
  return "trainer " + workers + " --local-workers 0 --train-threads 1 --batch-size 8 --log-every 10 --steps " +
         std::to_string(steps) + " --data synthetic --image-size 16 --emulate-step-ms 15 --audit-samples" +
         " --summary-json " + (dir / "s.json").string();
}

void write_list(const fs::path& path, const std::vector<std::string>& targets) {
  const fs::path next = path.string() + ".new";
  {
    std::ofstream out(next);
    for (const std::string& t : targets) out << t << "\n";
  }
  fs::rename(next, path);
}

json source(const json& summary, const std::string& address) {
  for (const json& w : summary["workers"]) {
    if (w["address"] == address) return w;
  }
  return json::object();
}

void expect_nothing_lost(const json& summary) {
  const json& audit = summary["sample_audit"];
  EXPECT_EQ(audit["missing"], 0) << audit.dump();
  EXPECT_EQ(audit["duplicated"], 0) << audit.dump();
  EXPECT_EQ(audit["unplanned"], 0) << audit.dump();
}

TEST(ElasticPool, AWorkerAddedToTheWatchFileJoinsAndOneRemovedLeaves) {
  const fs::path dir = fresh_dir("elastic-watch");
  Worker a = start_worker(worker_flags(), dir / "a.log");
  Worker b = start_worker(worker_flags(), dir / "b.log");
  ASSERT_NE(a.port, 0) << slurp(dir / "a.log");
  ASSERT_NE(b.port, 0) << slurp(dir / "b.log");
  const fs::path list = dir / "workers";
  write_list(list, {a.target()});
  const int steps = 600;
  Child trainer = spawn(trainer_args("--workers-watch " + list.string(), dir, steps), dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=20 ", 120s)) << slurp(dir / "trainer.log");
  write_list(list, {a.target(), b.target()});
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", b.target() + " joined", 30s)) << slurp(dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=450 ", 60s)) << slurp(dir / "trainer.log");
  write_list(list, {a.target()});
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", b.target() + " leaves the feed", 30s)) << slurp(dir / "trainer.log");
  ASSERT_EQ(wait_exit(trainer, 120s), 0) << slurp(dir / "trainer.log");
  const json summary = json::parse(slurp(dir / "s.json"));
  const json joined = source(summary, b.target());
  ASSERT_FALSE(joined.empty()) << summary["workers"].dump();
  EXPECT_GE(joined["batches"].get<int>(), steps / 5) << summary["workers"].dump();
  EXPECT_FALSE(joined["failed"].get<bool>()) << joined.dump();
  EXPECT_TRUE(joined.contains("left")) << joined.dump();
  expect_nothing_lost(summary);
}

TEST(ElasticPool, ADrainedWorkerAnswersWhatItAcceptedAndExitsZero) {
  const fs::path dir = fresh_dir("elastic-drain");
  Worker a = start_worker(worker_flags(), dir / "a.log");
  Worker b = start_worker(worker_flags(" --drain"), dir / "b.log");
  ASSERT_NE(a.port, 0) << slurp(dir / "a.log");
  ASSERT_NE(b.port, 0) << slurp(dir / "b.log");
  Child trainer = spawn(trainer_args("--workers " + a.target() + "," + b.target(), dir, 300), dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=50 ", 120s)) << slurp(dir / "trainer.log");
  kill(b.child.pid, SIGTERM);
  EXPECT_EQ(wait_exit(b.child, 30s), 0) << slurp(dir / "b.log");
  EXPECT_TRUE(wait_for_text(dir / "trainer.log", b.target() + " is leaving", 5s)) << slurp(dir / "trainer.log");
  ASSERT_EQ(wait_exit(trainer, 120s), 0) << slurp(dir / "trainer.log");
  const json summary = json::parse(slurp(dir / "s.json"));
  const json drained = source(summary, b.target());
  EXPECT_FALSE(drained["failed"].get<bool>()) << drained.dump() << "\n" << slurp(dir / "trainer.log");
  EXPECT_TRUE(drained.contains("left")) << drained.dump();
  EXPECT_GT(drained["batches"].get<int>(), 0) << drained.dump();
  EXPECT_EQ(drained["hedged"], 0) << "the trainer hedged against a worker that said it answers";
  expect_nothing_lost(summary);
}

}  // namespace
}  // namespace tandem
