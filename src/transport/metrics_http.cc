#include "tandem/transport/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"

namespace tandem::transport {
namespace {

constexpr int kRequestDeadlineMs = 2000;
constexpr size_t kMostRequestBytes = 8192;

// The request's head (up to the blank line), read within the deadline; "" when the
// client said nothing in time or too much.
std::string read_head(int fd) {
  std::string head;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRequestDeadlineMs);
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || head.size() > kMostRequestBytes) return "";
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return head;
    head.append(buf, static_cast<size_t>(n));
  }
  return head;
}

void send_all(int fd, const std::string& text) {
  for (size_t sent = 0; sent < text.size();) {
    const ssize_t n = send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string answer(int code, const char* status, const std::string& type, const std::string& body) {
  return fmt::format("HTTP/1.0 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", code,
                     status, type, body.size(), body);
}

}  // namespace

std::string label(const std::string& key, const std::string& value) {
  std::string out = key + "=\"";
  for (const char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string prometheus_text(const std::vector<Gauge>& gauges) {
  std::string out;
  for (const Gauge& g : gauges) {
    out += "# HELP " + g.name + " " + g.help + "\n# TYPE " + g.name + " " + g.type + "\n";
    for (const auto& [labels, value] : g.samples) {
      const std::string v = std::isfinite(value) ? fmt::format("{}", value) : (std::isnan(value) ? "NaN" : "+Inf");
      out += g.name + (labels.empty() ? "" : "{" + labels + "}") + " " + v + "\n";
    }
  }
  return out;
}

struct MetricsServer::Impl {
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // a byte on wake[1] ends the thread
  int port = 0;
  std::function<std::string()> render;
  std::thread thread;

  void serve_one(int fd) const {
    const std::string head = read_head(fd);
    if (head.empty()) return;
    const bool metrics = head.starts_with("GET /metrics ") || head.starts_with("GET /metrics?") ||
                         head.starts_with("GET /metrics\r") || head.starts_with("GET /metrics\n");
    if (!metrics) return send_all(fd, answer(404, "Not Found", "text/plain", "tandem serves only /metrics\n"));
    std::string body;
    try {
      body = render();
    } catch (const std::exception& e) {
      return send_all(fd, answer(500, "Internal Server Error", "text/plain", std::string(e.what()) + "\n"));
    }
    send_all(fd, answer(200, "OK", "text/plain; version=0.0.4; charset=utf-8", body));
  }

  void run() const {
    for (;;) {
      pollfd fds[2] = {{listen_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents) return;
      const int fd = accept(listen_fd, nullptr, nullptr);
      if (fd < 0) continue;
      serve_one(fd);
      close(fd);
    }
  }
};

MetricsServer::MetricsServer(const std::string& bind, int port, std::function<std::string()> render)
    : impl_(std::make_unique<Impl>()) {
  impl_->render = std::move(render);
  const std::string where = bind + ":" + std::to_string(port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, bind.c_str(), &addr.sin_addr) != 1) {
    throw ConfigError("--metrics-port: cannot listen on " + where + ": not an IPv4 address (--bind)");
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 16) != 0 ||
      pipe2(impl_->wake, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    throw NetworkError("cannot serve metrics on " + where + " (" + why +
                       "): is another process using the port? Choose another with --metrics-port");
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl_->listen_fd = fd;
  impl_->port = ntohs(addr.sin_port);
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
  spdlog::info("metrics for Prometheus at http://{}:{}/metrics", bind, impl_->port);
}

MetricsServer::~MetricsServer() {
  if (impl_->wake[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = write(impl_->wake[1], &byte, 1);
  }
  if (impl_->thread.joinable()) impl_->thread.join();
  for (const int fd : {impl_->listen_fd, impl_->wake[0], impl_->wake[1]}) {
    if (fd >= 0) close(fd);
  }
}

int MetricsServer::port() const { return impl_->port; }

}  // namespace tandem::transport
