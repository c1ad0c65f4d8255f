// What --metrics-port serves (Prometheus text, transport/metrics_http.h): a trainer's
// rank 0 from its last metrics line and its feed now, a data worker from its server.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/common/settings.h"
#include "tandem/feed/scheduler.h"
#include "tandem/report/run_log.h"
#include "tandem/transport/metrics_http.h"
#include "tandem/transport/worker_server.h"

namespace tandem::launch {

// The trainer's gauges: the last log window's samples/s, data wait and step, each
// source's rate and capacity, requests in flight, the live workers and
// tandem_workers_wanted (NaN until a worker's capacity is known).
std::string trainer_metrics(const nlohmann::json& last_line, const feed::Scheduler& scheduler);
// A data worker's: open streams, threads, batches and samples served, whether it is leaving.
std::string worker_metrics(const transport::WorkerServer::Stats& s);

// The server for --metrics-port (cluster.metrics_port), or null when it is -1.
std::unique_ptr<transport::MetricsServer> serve_metrics(const ClusterOptions& cluster,
                                                        std::function<std::string()> render);

}  // namespace tandem::launch
