// What --metrics-port serves (Prometheus text through prometheus-cpp, served by
// transport/metrics_server.h): a trainer's rank 0 (tandem's trainer, or a script's
// tandem.Feed) from its last metrics line and its feed now, a data worker from its
// server. A value not known yet has no sample (never NaN); a worker that failed or left
// has no series; totals are counters (`_total`).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/transport/metrics_server.h"
#include "tandem/transport/worker_server.h"

namespace tandem::transport {

// The trainer's: the last log window's samples/s, data wait and step, requests in flight,
// the live workers and tandem_workers_wanted; each serving source's rate, capacity and
// batches delivered (a counter). Thread-safe: scrapes may come at once.
class TrainerMetrics {
 public:
  TrainerMetrics();
  ~TrainerMetrics();
  // The page for a scrape. `last_line`: the last metrics line (null before the first);
  // `in_flight`: the feed's requests given out and not answered (Scheduler::in_flight).
  std::string page(const nlohmann::json& last_line, double in_flight);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A data worker's: open streams, threads, whether it is leaving, and the batches and
// samples it served (counters).
class WorkerMetrics {
 public:
  WorkerMetrics();
  ~WorkerMetrics();
  std::string page(const WorkerServer::Stats& s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The server for --metrics-port `port` (0 = a free one) on `bind`, or null when the port
// is -1.
std::unique_ptr<MetricsServer> serve_metrics(int port, const std::string& bind, std::function<std::string()> render);

}  // namespace tandem::transport
