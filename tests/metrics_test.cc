// The live scaling signal (issue 37): tandem_workers_wanted's arithmetic, Prometheus text
// over HTTP (one path, a silent client bounded), and /metrics read from a real trainer and
// worker while they run: the wanted count rises above the pool when its one worker is too
// slow, and falls below it when two fast workers feed a slow loop.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "process_helpers.h"
#include "tandem/report/run_log.h"
#include "tandem/report/scaling.h"
#include "tandem/common/error.h"
#include "tandem/transport/live_metrics.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using namespace tandem::testing;

// GET `path` from 127.0.0.1:port: the whole answer, "" when nothing came.
std::string http_get(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
    if (send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

// A metric's value in Prometheus text (the first sample of that name), NaN when absent.
double metric(const std::string& text, const std::string& name) {
  const std::regex line("\n" + name + "(\\{[^}]*\\})? ([^\\n]+)");
  std::smatch m;
  if (!std::regex_search(text, m, line)) return std::nan("");
  return std::stod(m[2].str());
}

TEST(Scaling, WorkersWantedIsTheNeedOverTheMeanCapacity) {
  report::ScalingInputs in{1000, 0, {200, 300}, 0.05};
  EXPECT_EQ(report::workers_wanted(in), 4);  // 950 / 250 = 3.8
  in.local = 500;
  EXPECT_EQ(report::workers_wanted(in), 2);  // 450 / 250
  in.capacities = {0, 0};
  EXPECT_EQ(report::workers_wanted(in), std::nullopt) << "no worker's capacity known yet";
  report::SourceStats s;
  s.samples = 1000;
  s.compute_seconds = 4;
  s.threads = 8;
  EXPECT_DOUBLE_EQ(report::worker_capacity(s), 2000);
}

// A connection to 127.0.0.1:port that says nothing (-1 when refused).
int idle_connection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(MetricsServer, ServesOnePathAndIdleConnectionsDoNotStallAScrape) {
  std::atomic<int> scrapes = 0;
  transport::MetricsServerOptions o;
  o.bind = "127.0.0.1";
  transport::MetricsServer server(o, [&] {
    if (++scrapes == 2) throw std::runtime_error("the run's records are gone");
    return std::string("# TYPE tandem_x gauge\ntandem_x 2.5\n");
  });
  // Twenty clients that connect and say nothing (the hostile run's 20 stalled every
  // scrape of the old one-thread server): a scrape is still answered.
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(idle_connection(server.port()));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string page = http_get(server.port(), "/metrics");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "idle connections held up the scrape";
  for (const int fd : idle) close(fd);
  EXPECT_NE(page.find("200 OK"), std::string::npos) << page;
  EXPECT_NE(page.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << page;
  EXPECT_NE(page.find("\r\n\r\n# TYPE tandem_x gauge\ntandem_x 2.5\n"), std::string::npos) << page;
  // A page that cannot be made is a 500 with the reason; the server goes on.
  const std::string failed = http_get(server.port(), "/metrics");
  EXPECT_NE(failed.find("500"), std::string::npos) << failed;
  EXPECT_NE(failed.find("the run's records are gone"), std::string::npos) << failed;
  EXPECT_NE(http_get(server.port(), "/metrics").find("200 OK"), std::string::npos);
  EXPECT_NE(http_get(server.port(), "/other").find("404"), std::string::npos);
  EXPECT_EQ(scrapes, 3);
}

TEST(MetricsServer, ATakenPortIsAConfigurationErrorNamingItAndTheFix) {
  transport::MetricsServerOptions o;
  o.bind = "127.0.0.1";
  transport::MetricsServer first(o, [] { return std::string(); });
  o.port = first.port();
  try {
    transport::MetricsServer second(o, [] { return std::string(); });
    FAIL() << "two servers on one port";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(o.port)), std::string::npos) << what;
    EXPECT_NE(what.find("Address already in use"), std::string::npos) << what;
    EXPECT_NE(what.find("--metrics-port"), std::string::npos) << what;
  }
  o.bind = "10.255.255.1";  // not this host's
  o.port = 0;
  EXPECT_THROW(transport::MetricsServer(o, [] { return std::string(); }), ConfigError);
}

// A trainer's metrics line with two workers, one of them gone (failed).
nlohmann::json line(int step, int batches_a, bool b_serving) {
  nlohmann::json b = {{"name", "10.0.0.2:6000"}, {"batches", 5}, {"images_per_sec", 40.0}, {"capacity", 90.0}};
  if (!b_serving) b["serving"] = false;
  return {{"step", step},
          {"samples_per_sec", 100.0},
          {"data_wait_pct", 20.0},
          {"workers", b_serving ? 2 : 1},
          {"sources",
           {{{"name", "10.0.0.1:6000"}, {"batches", batches_a}, {"images_per_sec", 60.0}, {"capacity", 80.0}}, b}}};
}

TEST(LiveMetrics, UnknownValuesHaveNoSampleTotalsAreCountersAndDepartedWorkersGo) {
  transport::TrainerMetrics m;
  const std::string before = m.page(nullptr, 0);
  EXPECT_EQ(before.find("NaN"), std::string::npos) << before;
  EXPECT_EQ(before.find("Nan"), std::string::npos) << before;
  EXPECT_TRUE(std::isnan(metric(before, "tandem_workers_wanted"))) << "no sample until it is known: " << before;
  EXPECT_TRUE(std::isnan(metric(before, "tandem_step"))) << before;
  EXPECT_EQ(metric(before, "tandem_requests_in_flight"), 0) << before;

  const std::string first = m.page(line(10, 7, true), 3);
  EXPECT_EQ(metric(first, "tandem_step"), 10) << first;
  EXPECT_DOUBLE_EQ(metric(first, "tandem_data_wait_ratio"), 0.2) << first;
  EXPECT_NE(first.find("# TYPE tandem_source_batches_total counter"), std::string::npos) << first;
  EXPECT_NE(first.find("tandem_source_batches_total{source=\"10.0.0.1:6000\"} 7"), std::string::npos) << first;
  EXPECT_NE(first.find("tandem_worker_capacity_samples_per_second{source=\"10.0.0.2:6000\"} 90"), std::string::npos);
  // The same line scraped again adds nothing; the next line adds its window's batches.
  EXPECT_NE(m.page(line(10, 7, true), 3).find("{source=\"10.0.0.1:6000\"} 7\n"), std::string::npos);
  const std::string next = m.page(line(20, 4, true), 3);
  EXPECT_NE(next.find("tandem_source_batches_total{source=\"10.0.0.1:6000\"} 11"), std::string::npos) << next;
  // 10.0.0.2 fails: every series of it goes.
  const std::string after = m.page(line(30, 4, false), 3);
  EXPECT_EQ(after.find("10.0.0.2"), std::string::npos) << after;
  EXPECT_NE(after.find("10.0.0.1:6000"), std::string::npos) << after;
  EXPECT_EQ(metric(after, "tandem_workers"), 1) << after;

  transport::WorkerMetrics w;
  transport::WorkerServer::Stats s;
  s.batches_served = 3;
  s.samples_served = 24;
  const std::string worker = w.page(s);
  EXPECT_NE(worker.find("# TYPE tandem_worker_samples_served_total counter\ntandem_worker_samples_served_total 24"),
            std::string::npos)
      << worker;
  s.batches_served = 5;
  EXPECT_EQ(metric(w.page(s), "tandem_worker_batches_served_total"), 5);
}

// The trainer's own metrics line marks a failed worker, and its series go from the page.
TEST(LiveMetrics, AWorkerThatFailedHasNoSeriesFromTheRunsOwnLine) {
  const fs::path dir = fresh_dir("metrics-line");
  report::MetricsLog log((dir / "metrics.jsonl").string(), false, 0);
  report::LogPoint p;
  p.step = 5;
  p.window_s = 1;
  p.samples_per_sec = 80;
  report::SourceStats a{"10.0.0.1:6000", 10, 80, 2.0};
  report::SourceStats b{"10.0.0.2:6000", 4, 32, 1.0};
  a.threads = b.threads = 2;
  log.write(p, {a, b});
  transport::TrainerMetrics m;
  EXPECT_NE(m.page(log.last(), 0).find("10.0.0.2:6000"), std::string::npos);
  b.failed = true;
  p.step = 10;
  log.write(p, {a, b});
  const std::string page = m.page(log.last(), 0);
  EXPECT_EQ(page.find("10.0.0.2:6000"), std::string::npos) << page;
  EXPECT_NE(page.find("10.0.0.1:6000"), std::string::npos) << page;
  EXPECT_EQ(metric(page, "tandem_workers"), 1) << page;
}

struct Scrape {
  double wanted = std::nan("");
  double workers = std::nan("");
};

// /metrics of a running trainer, once it has logged a few windows.
Scrape scrape_trainer(const fs::path& log) {
  const std::regex at("metrics for Prometheus at http://[^:]+:([0-9]+)/metrics");
  std::smatch m;
  const std::string text = slurp(log);
  if (!std::regex_search(text, m, at)) return {};
  const int port = std::stoi(m[1].str());
  Scrape s;
  for (int i = 0; i < 100 && std::isnan(s.wanted); ++i) {
    const std::string page = http_get(port, "/metrics");
    s.wanted = metric(page, "tandem_workers_wanted");
    s.workers = metric(page, "tandem_workers");
    if (std::isnan(s.wanted)) std::this_thread::sleep_for(200ms);
  }
  return s;
}

std::string trainer_args(const std::string& workers, const fs::path& dir, const std::string& extra) {
  return "trainer --workers " + workers + " --local-workers 0 --train-threads 1 --batch-size 8 --log-every 5"
         " --steps 100000 --data blur-benchmark --image-size 32 --metrics-port 0 --summary-json " +
         (dir / "s.json").string() + extra;
}

TEST(LiveMetrics, WorkersWantedRisesWhenTheWorkerIsTooSlowAndFallsWhenThereAreTooMany) {
  const fs::path dir = fresh_dir("live-metrics");
  const std::string flags = "--threads 1 --data blur-benchmark --image-size 32 --idle-timeout 60 --metrics-port 0";
  {  // One worker 200 times slower than its core: the loop waits, and wants more of them.
    Worker slow = start_worker(flags + " --emulate-slowdown 200", dir / "slow.log");
    ASSERT_NE(slow.port, 0) << slurp(dir / "slow.log");
    Child trainer = spawn(trainer_args(slow.target(), dir, ""), dir / "t1.log");
    ASSERT_TRUE(wait_for_text(dir / "t1.log", "step=15 ", 120s)) << slurp(dir / "t1.log");
    const Scrape s = scrape_trainer(dir / "t1.log");
    EXPECT_EQ(s.workers, 1);
    EXPECT_GE(s.wanted, 2) << slurp(dir / "t1.log");
    const std::regex at("metrics for Prometheus at http://[^:]+:([0-9]+)/metrics");
    std::smatch m;
    const std::string wlog = slurp(dir / "slow.log");
    ASSERT_TRUE(std::regex_search(wlog, m, at)) << wlog;
    const int port = std::stoi(m[1].str());
    const std::string page = http_get(port, "/metrics");
    EXPECT_EQ(metric(page, "tandem_worker_open_streams"), 1) << page;
    // It listens where the worker does (--bind 127.0.0.1), not on every address (what
    // `ss -ltn` shows, read from the kernel's table: no iproute2 needed).
    EXPECT_TRUE(listens_on("0100007F", port)) << slurp("/proc/net/tcp");
    EXPECT_FALSE(listens_on("00000000", port)) << slurp("/proc/net/tcp");
    EXPECT_GT(metric(page, "tandem_worker_batches_served_total"), 0) << page;
    kill(trainer.pid, SIGTERM);
    wait_exit(trainer, 60s);
  }
  {  // Two fast workers and a loop of 100 ms steps: one worker would do.
    Worker a = start_worker(flags, dir / "a.log");
    Worker b = start_worker(flags, dir / "b.log");
    Child trainer = spawn(trainer_args(a.target() + "," + b.target(), dir, " --emulate-step-ms 100"), dir / "t2.log");
    ASSERT_TRUE(wait_for_text(dir / "t2.log", "step=15 ", 120s)) << slurp(dir / "t2.log");
    const Scrape s = scrape_trainer(dir / "t2.log");
    EXPECT_EQ(s.workers, 2);
    EXPECT_EQ(s.wanted, 1) << slurp(dir / "t2.log");
    kill(trainer.pid, SIGTERM);
    wait_exit(trainer, 60s);
  }
}

}  // namespace
}  // namespace tandem
