// A pool of data workers for several jobs (`tandem worker --pool-jobs`), with real
// processes on loopback: jobs admitted by their own tokens, apart from each other, the
// pool outliving them, identical jobs sharing what it makes.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const char* kData = " --data synthetic --image-size 16 --dataset-size 480 --seed 3";

void write_jobs(const fs::path& file, const nlohmann::json& jobs) {
  const fs::path tmp = file.string() + ".tmp";
  std::ofstream(tmp) << nlohmann::json{{"jobs", jobs}}.dump();
  fs::rename(tmp, file);
}

fs::path token_file(const fs::path& dir, const std::string& name, const std::string& token) {
  const fs::path f = dir / (name + ".token");
  std::ofstream(f) << token;
  return f;
}

// A trainer of job `name` on the pool: 30 steps of 8 (half an epoch), audited.
std::string trainer(const fs::path& dir, const Worker& pool, const std::string& name, const std::string& token,
                    const std::string& extra = "", const std::string& data = kData) {
  fs::create_directories(dir / name);
  return "trainer --workers " + pool.target() + " --local-workers 0 --train-threads 1 --batch-size 8 --steps 30" +
         data + " --audit-samples --log-every 10 --token-file " + token_file(dir, name, token).string() +
         " --job-name " + name + " --sagemaker-root " + (dir / name).string() + " --summary-json " +
         (dir / name / "s.json").string() + extra;
}

void expect_clean_audit(const fs::path& summary) {
  const auto s = nlohmann::json::parse(slurp(summary));
  const auto& a = s["sample_audit"];
  EXPECT_EQ(a["planned"], 240) << a.dump(2);
  EXPECT_EQ(a["consumed"], 240) << a.dump(2);
  EXPECT_EQ(a["missing"], 0) << a.dump(2);
  EXPECT_EQ(a["duplicated"], 0) << a.dump(2);
}

// "job 'NAME': B batches, S samples served (M made for it, K shared ...)" from the pool's log.
std::pair<uint64_t, uint64_t> served_and_made(const std::string& log, const std::string& job) {
  const std::regex line("job '" + job + "': \\d+ batches, (\\d+) samples served \\((\\d+) made for it");
  std::smatch m;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) m = *it;
  if (m.empty()) return {0, 0};
  return {std::stoull(m[1]), std::stoull(m[2])};
}

TEST(Pool, TwoJobsByTheirOwnTokensTrainApartAndThePoolOutlivesThem) {
  const fs::path dir = fresh_dir("pool-jobs");
  const fs::path jobs = dir / "jobs.json";
  write_jobs(jobs, {{{"name", "lr-a"}, {"token", "token-of-a"}}, {{"name", "lr-b"}, {"token", "token-of-b"}},
                    {{"name", "lr-c"}, {"token", "token-of-c"}}});
  Worker pool = start_worker("--threads 2 --pool-jobs " + jobs.string() + kData, dir / "pool.log");
  ASSERT_GT(pool.port, 0) << slurp(dir / "pool.log");
  // Both at once, the second slowed (a step of 300 ms, ten times the first's): neither waits for the other.
  Child a = spawn(trainer(dir, pool, "lr-a", "token-of-a"), dir / "a.log");
  Child b = spawn(trainer(dir, pool, "lr-b", "token-of-b", " --emulate-step-ms 300"), dir / "b.log");
  ASSERT_EQ(wait_exit(a, 120s), 0) << slurp(dir / "a.log");
  EXPECT_TRUE(waitpid(b.pid, nullptr, WNOHANG) == 0) << "the slow job ended first: the fast one waited for it";
  ASSERT_EQ(wait_exit(b, 120s), 0) << slurp(dir / "b.log");
  expect_clean_audit(dir / "lr-a/s.json");
  expect_clean_audit(dir / "lr-b/s.json");

  // Each released its own streams; the pool serves on.
  ASSERT_TRUE(wait_for_text(dir / "pool.log", "job 'lr-b': ", 30s)) << slurp(dir / "pool.log");
  ASSERT_TRUE(wait_for_text(dir / "pool.log", "job 'lr-a': ", 30s)) << slurp(dir / "pool.log");
  const std::string log = slurp(dir / "pool.log");
  for (const char* part : {"a pool for 3 job(s)", "job 'lr-a' released the pool", "job 'lr-b' released the pool",
                           "the pool serves on"}) {
    EXPECT_NE(log.find(part), std::string::npos) << part << " not in:\n" << log;
  }
  EXPECT_EQ(waitpid(pool.child.pid, nullptr, WNOHANG), 0) << "the pool exited:\n" << log;
  // Identical jobs (data, seed, batch geometry): every batch made once, served twice.
  const auto [a_served, a_made] = served_and_made(log, "lr-a");
  const auto [b_served, b_made] = served_and_made(log, "lr-b");
  EXPECT_EQ(a_served, 240u) << log;
  EXPECT_EQ(b_served, 240u) << log;
  EXPECT_EQ(a_made + b_made, 240u) << "made should be half of served:\n" << log;
  // And each job's summary says what the pool did for it.
  const auto sa = nlohmann::json::parse(slurp(dir / "lr-a/s.json"))["pool"];
  const auto sb = nlohmann::json::parse(slurp(dir / "lr-b/s.json"))["pool"];
  EXPECT_EQ(sa["samples_served"], 240) << sa.dump();
  EXPECT_EQ(sa["samples_made"].get<uint64_t>() + sb["samples_made"].get<uint64_t>(), 240u) << sa << sb;
  EXPECT_EQ(sb["samples_shared"].get<uint64_t>() + sa["samples_shared"].get<uint64_t>(), 240u) << sa << sb;

  // A token taken out of the file is refused by name; so is one never issued, and a
  // job's token under another job's name.
  write_jobs(jobs, {{{"name", "lr-a"}, {"token", "token-of-a"}}, {{"name", "lr-b"}, {"token", "token-of-b"}}});
  std::this_thread::sleep_for(1200ms);  // the pool re-reads a changed file at most once a second
  const Outcome revoked = run_capture(trainer(dir, pool, "lr-c", "token-of-c") + " --connect-timeout 5",
                                      dir / "c.log", 60);
  EXPECT_NE(revoked.code, 0);
  EXPECT_NE(revoked.out.find("not one of this pool's jobs (revoked, or never issued)"), std::string::npos)
      << revoked.out;
  const Outcome foreign = run_capture(trainer(dir, pool, "lr-d", "token-of-a") + " --connect-timeout 5",
                                      dir / "d.log", 60);
  EXPECT_NE(foreign.code, 0);
  EXPECT_NE(foreign.out.find("this token is job 'lr-a''s, and the trainer says it is job 'lr-d'"), std::string::npos)
      << foreign.out;
  // A job's release never stops the pool; the operator's signal does.
  EXPECT_EQ(waitpid(pool.child.pid, nullptr, WNOHANG), 0) << slurp(dir / "pool.log");
  kill(pool.child.pid, SIGTERM);
  EXPECT_NE(wait_exit(pool.child, 60s), -1) << slurp(dir / "pool.log");
  fs::remove_all(dir);
}

// A job whose settings are its own (another image size and seed: other samples, another
// pipeline) is served its dataset on the same pool; its trainer must ask for that one.
TEST(Pool, AJobWithSettingsOfItsOwnIsServedItsOwnDataset) {
  const fs::path dir = fresh_dir("pool-settings");
  const fs::path jobs = dir / "jobs.json";
  write_jobs(jobs, {{{"name", "small"}, {"token", "t-small"}},
                    {{"name", "big"}, {"token", "t-big"}, {"settings", {{"image-size", 24}, {"seed", 4}}}}});
  Worker pool = start_worker("--threads 2 --pool-jobs " + jobs.string() + kData, dir / "pool.log");
  ASSERT_GT(pool.port, 0) << slurp(dir / "pool.log");
  EXPECT_NE(slurp(dir / "pool.log").find(R"(a job's dataset {"image-size":24,"seed":4})"), std::string::npos)
      << slurp(dir / "pool.log");
  Child small = spawn(trainer(dir, pool, "small", "t-small"), dir / "small.log");
  Child big = spawn(trainer(dir, pool, "big", "t-big", "", " --data synthetic --image-size 24 --dataset-size 480 --seed 4"),
                    dir / "big.log");
  ASSERT_EQ(wait_exit(small, 120s), 0) << slurp(dir / "small.log");
  ASSERT_EQ(wait_exit(big, 120s), 0) << slurp(dir / "big.log");
  expect_clean_audit(dir / "small/s.json");
  expect_clean_audit(dir / "big/s.json");
  // Its token with the pool's own settings: the dataset differs, said by name.
  const Outcome wrong = run_capture(trainer(dir, pool, "big", "t-big") + " --connect-timeout 5", dir / "wrong.log", 60);
  EXPECT_EQ(wrong.code, 3) << wrong.out;
  EXPECT_NE(wrong.out.find("image size 24"), std::string::npos) << wrong.out;
  kill(pool.child.pid, SIGTERM);
  EXPECT_NE(wait_exit(pool.child, 60s), -1);

  // A setting that is not a data setting stops the pool at its start, named.
  write_jobs(jobs, {{{"name", "a"}, {"token", "t"}, {"settings", {{"batch-size", 8}}}}});
  const Outcome bad = run_capture("worker --port 0 --pool-jobs " + jobs.string() + kData, dir / "bad.log", 30);
  EXPECT_EQ(bad.code, 3) << bad.out;
  EXPECT_NE(bad.out.find("a pool job's setting 'batch-size' is not a data setting"), std::string::npos) << bad.out;
  fs::remove_all(dir);
}

TEST(Pool, ABadJobsFileIsOneErrorNamingIt) {
  const fs::path dir = fresh_dir("pool-bad-jobs");
  std::ofstream(dir / "jobs.json") << R"({"jobs": [{"name": "a", "token": "t"}, {"name": "b", "token": "t"}]})";
  const Outcome twice = run_capture("worker --port 0 --pool-jobs " + (dir / "jobs.json").string() + kData,
                                    dir / "twice.log", 30);
  EXPECT_EQ(twice.code, 3) << twice.out;
  EXPECT_NE(twice.out.find("job 'b' has another job's token"), std::string::npos) << twice.out;
  std::ofstream(dir / "weight.json") << R"({"jobs": [{"name": "a", "token": "t", "weight": -1}]})";
  const Outcome weight = run_capture("worker --port 0 --pool-jobs " + (dir / "weight.json").string() + kData,
                                     dir / "weight.log", 30);
  EXPECT_EQ(weight.code, 3) << weight.out;
  EXPECT_NE(weight.out.find("weight.json: jobs[0] ('a') has weight -1"), std::string::npos) << weight.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::testing
