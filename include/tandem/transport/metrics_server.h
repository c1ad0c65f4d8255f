// Prometheus metrics over HTTP (--metrics-port, --metrics-bind): GET /metrics answers
// the page `render()` gives (transport/live_metrics.h builds it with prometheus-cpp),
// anything else 404. Served by civetweb, the server prometheus-cpp's own Exposer is built
// on, without the Exposer's own series (its latency summary reads NaN until scraped).
// Read-only and plain HTTP: the data plane's token and TLS are gRPC's and do not apply
// here, so bind it where only scrapers reach (--metrics-bind, or a worker's --bind).
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace tandem::transport {

struct MetricsServerOptions {
  std::string bind = "0.0.0.0";  // an IPv4 address
  int port = 0;                  // 0 = a free port (logged, and port())
  // Connections served at once, and how long one may take to send its request: a client
  // that connects and says nothing holds a thread this long, so idle connections delay a
  // scrape by about (idle / threads) x timeout. Beyond threads + 20 queued, connections
  // wait in the kernel's backlog, so the server never runs the process out of files.
  int threads = 16;
  int request_timeout_ms = 1000;
};

class MetricsServer {
 public:
  // Listens, or throws ConfigError naming the address, the reason (its port taken, an
  // address not this host's) and the flag that fixes it.
  MetricsServer(const MetricsServerOptions& opts, std::function<std::string()> render);
  ~MetricsServer();  // stops serving; no render() runs after it returns
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::transport
