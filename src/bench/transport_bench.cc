#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "tandem/bench/bench.h"
#include "tandem/common/clock.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/launch/process.h"
#include "tandem/launch/simulate.h"
#include "tandem/transport/grpc_runtime.h"
#include "tandem/transport/stream_relay.h"

namespace tandem::bench {
namespace {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// CPU-seconds process `pid` has used (/proc/PID/stat: utime + stime); 0 if it is gone.
double cpu_seconds_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; rest >> field && i <= 15; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// This process's child running `tandem worker` (the sender), once it has started.
pid_t worker_child(const std::string& port) {
  namespace fs = std::filesystem;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(entry.path() / "cmdline");
    std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    std::ifstream stat(entry.path() / "stat");
    std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = s.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(s.substr(close + 2));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid() && line.find(std::string("--port") + '\0' + port + '\0') != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

// The bench's own token and job name, so that what this process's environment says
// (TANDEM_TOKEN, TRAINING_JOB_NAME, SLURM_JOB_ID) reaches both ends alike: a fresh random
// token and "bench-<pid>".
SecurityOptions bench_security() {
  std::random_device random;
  SecurityOptions s;
  s.token = fmt::format("{:08x}{:08x}{:08x}{:08x}", random(), random(), random(), random());
  s.job = "bench-" + std::to_string(::getpid());
  return s;
}

// The sender: `tandem worker` serving pre-made batches, in its own process as on a CPU host.
launch::ProcessSpec sender(const std::string& tandem_exe, const BenchOptions& opts, const DataOptions& data, int port,
                           const SecurityOptions& security) {
  launch::ProcessSpec c;
  c.name = "worker";
  c.argv = {tandem_exe, "worker", "--port", std::to_string(port), "--bind", "127.0.0.1", "--data", "premade",
            "--threads", std::to_string(opts.threads > 0 ? opts.threads : 1), "--image-size",
            std::to_string(data.image_size), "--idle-timeout", "600", "--job-name", security.job};
  c.env["TANDEM_TOKEN"] = security.token;  // the environment, never the command line
  if (!data.wire_dtype.empty()) c.argv.insert(c.argv.end(), {"--wire-dtype", data.wire_dtype});
  c.critical = false;
  return c;
}

struct Pulled {
  uint64_t bytes = 0, images = 0, batches = 0;
};

// One rank of `ranks` pulling until `end`, counting from `start`.
Pulled pull(feed::RankFeed& feed, Clock::time_point start, Clock::time_point end) {
  Pulled p;
  while (Clock::now() < start) feed.next();
  while (Clock::now() < end) {
    const auto batch = feed.next();
    p.bytes += batch->data.size();
    p.images += static_cast<uint64_t>(batch->size());
    ++p.batches;
  }
  return p;
}

feed::FeedOptions rank_options(const BenchOptions& opts, const DataOptions& data, int port, int rank,
                               const std::string& relay, const SecurityOptions& security) {
  feed::FeedOptions fo;
  fo.data = data;
  fo.security = security;
  fo.workers = {"127.0.0.1:" + std::to_string(port)};
  fo.rank = rank;
  fo.world = opts.ranks;
  fo.batch_size = opts.batch_size;
  fo.prefetch = 8;
  fo.connect_timeout_s = 10;
  fo.batch_timeout_s = 60;
  fo.may_learn = false;
  fo.relay = relay;
  return fo;
}

// Ends the sender however the receiving side ended: released (the worker exits 0), or
// else stopped (SIGTERM), then its supervisor joined. An exception from the receiving side
// (a feed that cannot start) leaves no joinable thread to abort the process.
class SenderGuard {
 public:
  SenderGuard(std::thread& supervisor, int port, const SecurityOptions& security)
      : supervisor_(supervisor), port_(port), security_(security) {}
  ~SenderGuard() {
    if (feed::release_workers({"127.0.0.1:" + std::to_string(port_)}, security_, "bench over") == 0) {
      if (const pid_t worker = worker_child(std::to_string(port_)); worker > 0) ::kill(worker, SIGTERM);
    }
    supervisor_.join();
  }
  SenderGuard(const SenderGuard&) = delete;
  SenderGuard& operator=(const SenderGuard&) = delete;

 private:
  std::thread& supervisor_;
  int port_;
  SecurityOptions security_;
};

}  // namespace

// A worker process serving pre-made batches (the sender) and `ranks` trainer-side feeds in
// this process (the receiver) pulling them as fast as they come over loopback TCP
// (through a relay's Unix socket with via_relay), as iperf3's two ends are. Only the
// transport is measured: the worker's per-batch work is one memcpy of pre-made samples
// (and the batch's digest). Each end's CPU is its own process's.
nlohmann::json bench_transport(const BenchOptions& opts, const std::string& tandem_exe) {
  transport::keep_grpc_initialised();
  DataOptions data = opts.data;
  data.data = "premade";
  auto dataset = data::make_dataset(data);
  const int port = launch::free_loopback_ports(1).at(0);
  launch::SuperviseOptions sup;
  sup.timeout_s = 4 * opts.seconds + 300;
  sup.out = &std::cerr;  // stdout carries the result
  const SecurityOptions security = bench_security();
  std::thread supervisor([&, child = sender(tandem_exe, opts, data, port, security)] { launch::supervise({child}, sup); });
  std::optional<SenderGuard> sender_guard;
  sender_guard.emplace(supervisor, port, security);
  std::unique_ptr<transport::StreamRelay> relay;
  if (opts.via_relay) relay = std::make_unique<transport::StreamRelay>(transport::StreamRelayOptions{});

  const std::atomic<bool> never{false};
  std::vector<std::unique_ptr<feed::RankFeed>> feeds;
  for (int r = 0; r < opts.ranks; ++r) {
    feeds.push_back(std::make_unique<feed::RankFeed>(
        rank_options(opts, data, port, r, relay ? relay->address() : "", security), never));
    feeds.back()->start(1'000'000'000, 0, 0);  // more batches than any run takes
  }
  const auto start = Clock::now() + std::chrono::milliseconds(500);
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.seconds));
  std::vector<std::future<Pulled>> pulls;
  for (auto& f : feeds) pulls.push_back(std::async(std::launch::async, [&f, start, end] { return pull(*f, start, end); }));
  std::this_thread::sleep_until(start);
  const pid_t worker = worker_child(std::to_string(port));
  const double cpu0 = process_cpu_seconds(), sender0 = cpu_seconds_of(worker);
  Pulled all;
  for (auto& p : pulls) {
    const Pulled one = p.get();
    all.bytes += one.bytes;
    all.images += one.images;
    all.batches += one.batches;
  }
  const double cpu = process_cpu_seconds() - cpu0, sender_cpu = cpu_seconds_of(worker) - sender0;
  const double elapsed = seconds_between(start, Clock::now());
  for (auto& f : feeds) f->close();
  relay.reset();
  sender_guard.reset();  // the worker released, its supervisor joined
  return {{"bench", "transport"},
          {"bytes_per_sec", all.bytes / elapsed},
          {"bytes_per_cpu_second", cpu > 0 ? all.bytes / cpu : 0.0},
          {"sender_bytes_per_cpu_second", sender_cpu > 0 ? all.bytes / sender_cpu : 0.0},
          {"sender_cpu_seconds", sender_cpu},
          {"images_per_sec", all.images / elapsed},
          {"batches", all.batches},
          {"batch_size", opts.batch_size},
          {"batch_bytes", all.batches ? all.bytes / all.batches : 0},
          {"dtype", data::dtype_name(data::wire_dtype(data))},
          {"image_size", dataset->info().sample_shape[1]},
          {"threads", opts.threads > 0 ? opts.threads : 1},
          {"ranks", opts.ranks},
          {"via_relay", opts.via_relay},
          {"process_cpu_seconds", cpu},
          {"receiver_cpu_seconds", cpu},
          {"seconds", elapsed}};
}

}  // namespace tandem::bench
