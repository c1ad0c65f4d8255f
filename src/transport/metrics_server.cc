#include "tandem/transport/metrics_server.h"

#include <CivetServer.h>

#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"

namespace tandem::transport {
namespace {

// civetweb says why it could not start only through its log callback, called on the
// starting thread; the constructor collects it here ("cannot bind to ...: 98 (Address
// already in use)"). On civetweb's own threads it is null and lines go to the debug log.
thread_local std::vector<std::string>* start_log = nullptr;

int log_message(const mg_connection*, const char* message) {
  if (start_log) {
    start_log->emplace_back(message);
  } else {
    spdlog::debug("metrics server: {}", message);
  }
  return 1;  // handled: civetweb prints nothing itself
}

void send(mg_connection* conn, int code, const char* status, const char* type, const std::string& body) {
  mg_printf(conn, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", code,
            status, type, body.size());
  mg_write(conn, body.data(), body.size());
}

class MetricsHandler : public CivetHandler {
 public:
  explicit MetricsHandler(std::function<std::string()> render) : render_(std::move(render)) {}

  bool handleGet(CivetServer*, mg_connection* conn) override {
    const mg_request_info* req = mg_get_request_info(conn);
    if (std::string(req->local_uri ? req->local_uri : "") != "/metrics") {
      send(conn, 404, "Not Found", "text/plain", "tandem serves only /metrics\n");
      return true;
    }
    std::string body;
    try {  // an exception must not cross into civetweb's C threads (it would abort)
      body = render_();
    } catch (const std::exception& e) {
      send(conn, 500, "Internal Server Error", "text/plain", std::string(e.what()) + "\n");
      return true;
    }
    send(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
    return true;
  }

 private:
  std::function<std::string()> render_;
};

std::string why_not(const std::vector<std::string>& log) {
  for (const std::string& line : log) {
    if (line.find("cannot bind") != std::string::npos || line.find("invalid port") != std::string::npos) return line;
  }
  return log.empty() ? "civetweb gave no reason" : log.front();
}

}  // namespace

struct MetricsServer::Impl {
  MetricsHandler handler;
  CivetCallbacks callbacks;
  std::unique_ptr<CivetServer> server;
  int port = 0;

  explicit Impl(std::function<std::string()> render) : handler(std::move(render)) {
    callbacks.log_message = log_message;
  }
};

MetricsServer::MetricsServer(const MetricsServerOptions& opts, std::function<std::string()> render)
    : impl_(std::make_unique<Impl>(std::move(render))) {
  const std::string where = fmt::format("{}:{}", opts.bind, opts.port);
  const std::vector<std::string> options = {"listening_ports", where,
                                            "num_threads", std::to_string(opts.threads),
                                            "request_timeout_ms", std::to_string(opts.request_timeout_ms),
                                            "enable_keep_alive", "no"};
  std::vector<std::string> log;
  start_log = &log;
  try {
    impl_->server = std::make_unique<CivetServer>(options, &impl_->callbacks);
  } catch (const CivetException&) {
    start_log = nullptr;
    throw ConfigError(fmt::format("--metrics-port: cannot serve metrics on {} ({}): another process has the port, or "
                                  "the address is not this host's; choose another with --metrics-port (0 = a free one) "
                                  "or --metrics-bind",
                                  where, why_not(log)));
  }
  start_log = nullptr;
  impl_->server->addHandler("/metrics", impl_->handler);
  impl_->server->addHandler("/", impl_->handler);
  const std::vector<int> ports = impl_->server->getListeningPorts();
  impl_->port = ports.empty() ? opts.port : ports.front();
  spdlog::info("metrics for Prometheus at http://{}:{}/metrics", opts.bind, impl_->port);
}

MetricsServer::~MetricsServer() {
  if (impl_->server) impl_->server->close();
}

int MetricsServer::port() const { return impl_->port; }

}  // namespace tandem::transport
