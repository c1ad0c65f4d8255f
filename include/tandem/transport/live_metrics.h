// What --metrics-port serves (Prometheus text, transport/metrics_http.h): a trainer's
// rank 0 (tandem's trainer, or a script's tandem.Feed) from its last metrics line and its
// feed now, a data worker from its server.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/transport/metrics_http.h"
#include "tandem/transport/worker_server.h"

namespace tandem::transport {

// The trainer's gauges: the last log window's samples/s, data wait and step, each
// source's rate and capacity, requests in flight, the live workers and
// tandem_workers_wanted (NaN until a worker's capacity is known). `in_flight`: the
// feed's scheduler's requests given out and not answered (feed::Scheduler::in_flight).
std::string trainer_metrics(const nlohmann::json& last_line, double in_flight);
// A data worker's: open streams, threads, batches and samples served, whether it is leaving.
std::string worker_metrics(const WorkerServer::Stats& s);

// The server for --metrics-port `port` (0 = a free one), or null when it is -1.
std::unique_ptr<MetricsServer> serve_metrics(int port, std::function<std::string()> render);

}  // namespace tandem::transport
