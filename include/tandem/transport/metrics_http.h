// Prometheus text over HTTP (--metrics-port): GET /metrics answers what `render()` gives,
// anything else 404. One thread serves one connection at a time, each bounded by a short
// deadline, so a client that connects and says nothing delays a scrape by at most that.
// Small on purpose: one path, read-only, plain HTTP/1.0 answers; the data plane's own
// security (token, TLS) is gRPC's and does not apply here: bind it where scrapers reach.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tandem::transport {

// One metric family in Prometheus' text format: `# HELP`, `# TYPE gauge`, and a sample
// per entry of `samples` (labels such as {worker="10.0.0.1:6000"}, then the value).
struct Gauge {
  std::string name;
  std::string help;
  std::vector<std::pair<std::string, double>> samples;  // label set ("" for none), value
  std::string type = "gauge";                           // or "counter"
};
std::string prometheus_text(const std::vector<Gauge>& gauges);

// A label value, escaped as the format wants (backslash, quote, newline).
std::string label(const std::string& key, const std::string& value);

class MetricsServer {
 public:
  // Listens on bind:port (0 = a free port). Throws NetworkError naming the address and
  // the fix when it cannot.
  MetricsServer(const std::string& bind, int port, std::function<std::string()> render);
  ~MetricsServer();  // stops the thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::transport
