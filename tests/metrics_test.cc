// The live scaling signal (issue 37): tandem_workers_wanted's arithmetic, Prometheus text
// over HTTP (one path, a silent client bounded), and /metrics read from a real trainer and
// worker while they run: the wanted count rises above the pool when its one worker is too
// slow, and falls below it when two fast workers feed a slow loop.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "process_helpers.h"
#include "tandem/report/scaling.h"
#include "tandem/transport/metrics_http.h"

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

TEST(MetricsHttp, ServesOnePathAndASilentClientHoldsItUpOnlyBriefly) {
  int scrapes = 0;
  transport::MetricsServer server("127.0.0.1", 0, [&] {
    ++scrapes;
    return transport::prometheus_text(
        {{"tandem_x", "An example", {{"", 2.5}, {transport::label("source", "a\"b"), 1}}}});
  });
  // Connects and says nothing: bounded by the server's deadline, not forever.
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(server.port()));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(connect(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string page = http_get(server.port(), "/metrics");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
  close(silent);
  EXPECT_NE(page.find("HTTP/1.0 200 OK"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE tandem_x gauge\ntandem_x 2.5\ntandem_x{source=\"a\\\"b\"} 1\n"), std::string::npos)
      << page;
  EXPECT_NE(http_get(server.port(), "/other").find("404"), std::string::npos);
  EXPECT_EQ(scrapes, 1);
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
    const std::string page = http_get(std::stoi(m[1].str()), "/metrics");
    EXPECT_EQ(metric(page, "tandem_worker_open_streams"), 1) << page;
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
