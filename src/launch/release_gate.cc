#include "tandem/launch/release_gate.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>

#include "tandem/common/backoff.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kVersion = 1;
constexpr size_t kMaxLine = 4096;  // a report is ~200 bytes; more is not one

std::string hex(const unsigned char* bytes, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", bytes[i]);
  return out;
}

// HMAC-SHA256 of what a report says, keyed by the job's token.
std::string signature(const HostDone& done, const SecurityOptions& s) {
  const std::string text = fmt::format("tandem release v{}\n{}\n{}\n{}", kVersion, s.job, done.host, done.code);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), s.token.data(), static_cast<int>(s.token.size()),
           reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &len) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  }
  return hex(mac, len);
}

bool same(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void set_timeouts(int fd, double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  if (tv.tv_sec == 0 && tv.tv_usec < 1000) tv.tv_usec = 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // connect() too, on Linux
}

// One line from `fd` (without its newline) within `timeout_s` in all, however slowly the
// peer sends; what came by then when it is not a whole line. Stops at kMaxLine bytes.
std::string read_line(int fd, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string line;
  char buf[512];
  while (line.size() < kMaxLine) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    const int ready = left > 0 ? poll(&p, 1, static_cast<int>(left)) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
    if (const size_t nl = line.find('\n'); nl != std::string::npos) return line.substr(0, nl);
  }
  return line;
}

void send_all(int fd, const std::string& text) {
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the peer is gone: it sees no answer, which is an answer too
    sent += static_cast<size_t>(n);
  }
}

std::string peer_name(const sockaddr_storage& addr) {
  char host[NI_MAXHOST] = "?";
  char port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&addr), sizeof addr, host, sizeof host, port, sizeof port,
              NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

// A socket listening on every address (IPv6 and IPv4 at once where the host has IPv6,
// as c10d's store does), or -1 with errno set.
int listen_any(int port) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int on = 1, off = 0;
  if (fd >= 0) {
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd, 64) == 0) return fd;
    const int err = errno;
    close(fd);
    if (err != EAFNOSUPPORT && err != EADDRNOTAVAIL) {
      errno = err;
      return -1;
    }
  }
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(fd, 64) == 0) return fd;
  const int err = errno;
  close(fd);
  errno = err;
  return -1;
}

int bound_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                 : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

// One attempt: the first host's answer ("ok", "refused: ..."), or why there was none.
struct Attempt {
  std::string answer;
  std::string error;
};

Attempt send_once(const std::string& line, const ReportDoneOptions& o, double timeout_s) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(o.address.c_str(), std::to_string(o.port).c_str(), &hints, &found);
  if (rc != 0) return {"", std::string("cannot resolve it: ") + gai_strerror(rc)};
  Attempt result{"", "no address"};
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    set_timeouts(fd, timeout_s);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      result.error = std::strerror(errno);
      close(fd);
      continue;
    }
    send_all(fd, line + "\n");
    result.answer = read_line(fd, timeout_s);
    result.error = result.answer.empty() ? "it closed the connection without an answer" : "";
    close(fd);
    break;
  }
  freeaddrinfo(found);
  return result;
}

}  // namespace

std::string done_message(const HostDone& done, const SecurityOptions& security) {
  nlohmann::json j = {{"tandem_release", kVersion}, {"job", security.job}, {"host", done.host}, {"code", done.code}};
  if (!security.token.empty()) j["signature"] = signature(done, security);
  return j.dump();
}

std::string check_done_message(const std::string& line, const SecurityOptions& security,
                               const std::vector<std::string>& expected, HostDone& out) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("tandem_release", 0) != kVersion || !j.contains("host") || !j["host"].is_string() ||
      !j.contains("code") || !j["code"].is_number_integer() || !j.contains("job") || !j["job"].is_string()) {
    return "not a tandem launcher's report (v" + std::to_string(kVersion) + "): " + printable(line, 120);
  }
  HostDone d{j["host"].get<std::string>(), j["code"].get<int>()};
  if (d.code < 0 || d.code > 255) return fmt::format("exit code {} is not one", d.code);
  if (j["job"].get<std::string>() != security.job) {
    return fmt::format("it is of job '{}', not '{}'", printable(j["job"].get<std::string>(), 80),
                       printable(security.job, 80));
  }
  if (!security.token.empty()) {
    const auto sig = j.find("signature");
    if (sig == j.end() || !sig->is_string() || !same(sig->get<std::string>(), signature(d, security))) {
      return "its signature does not match this job's token (a launcher given another --token?)";
    }
  }
  if (std::find(expected.begin(), expected.end(), d.host) == expected.end()) {
    std::string names;
    for (const auto& h : expected) names += (names.empty() ? "" : ", ") + h;
    return fmt::format("host '{}' is not one of the other trainer hosts ({})", printable(d.host, 80), names);
  }
  out = std::move(d);
  return "";
}

int release_port(const LaunchOptions& launch, int master_port) {
  if (launch.release_port > 0) return launch.release_port;
  if (master_port >= 65535) {
    throw ConfigError("--master-port 65535 leaves no port above it for the trainer hosts' reports that their ranks "
                      "ended: give one with --release-port");
  }
  return master_port + 1;
}

ReleaseGate::ReleaseGate(ReleaseGateOptions opts) : opts_(std::move(opts)) {
  listen_fd_ = listen_any(opts_.port);
  if (listen_fd_ < 0) {
    throw ConfigError(fmt::format("cannot listen on port {} for the other trainer hosts' reports that their ranks "
                                  "ended: {}: give every host a free port with --release-port (0 = --master-port + 1)",
                                  opts_.port, std::strerror(errno)));
  }
  port_ = bound_port(listen_fd_);
  thread_ = std::thread([this] { serve(); });
}

ReleaseGate::~ReleaseGate() {
  done_ = true;
  thread_.join();
  close(listen_fd_);
}

void ReleaseGate::serve() {
  while (!done_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // One at a time, each within read_timeout_s in all: a report is one short line, and
    // a host whose report is held up by a slow peer tries again.
    set_timeouts(fd, opts_.read_timeout_s);  // the answer's send
    take(fd, peer_name(addr));
    close(fd);
  }
}

void ReleaseGate::take(int fd, const std::string& peer) {
  const std::string line = read_line(fd, opts_.read_timeout_s);
  HostDone d;
  const std::string why = check_done_message(line, opts_.security, opts_.expected, d);
  if (!why.empty()) {
    spdlog::warn("ignored a report from {} on the release port {}: {}", peer, port_, why);
    send_all(fd, "refused: " + why + "\n");
    return;
  }
  send_all(fd, "ok\n");
  std::lock_guard lock(mu_);
  if (!codes_.emplace(d.host, d.code).second) return;  // a retry of one already taken
  spdlog::info("trainer host {} reports its ranks ended (exit {})", d.host, d.code);
  changed_.notify_all();
}

ReleaseGate::Outcome ReleaseGate::outcome_locked(bool stopped) const {
  Outcome o;
  o.stopped = stopped;
  for (const auto& h : opts_.expected) {
    const auto it = codes_.find(h);
    if (it == codes_.end()) o.missing.push_back(h);
    else o.reports.push_back({h, it->second});
  }
  return o;
}

ReleaseGate::Outcome ReleaseGate::wait(double wait_s, const std::function<bool()>& stop) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_s));
  std::unique_lock lock(mu_);
  while (true) {
    const Outcome o = outcome_locked(false);
    const bool failed = std::any_of(o.reports.begin(), o.reports.end(), [](const HostDone& d) { return d.code != 0; });
    if (o.missing.empty() || failed || Clock::now() >= deadline) return o;
    if (stop && stop()) return outcome_locked(true);
    changed_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
  }
}

bool report_done(const HostDone& done, const ReportDoneOptions& o, const std::function<bool()>& stop) {
  const std::string line = done_message(done, o.security);
  const std::string where = fmt::format("the first trainer host ({}:{}, --release-port)", o.address, o.port);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.wait_s));
  Backoff backoff({0.2, 2, 5});
  std::string last;
  int attempts = 0;
  while (true) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    const Attempt a = send_once(line, o, std::clamp(left, 0.05, 5.0));
    ++attempts;
    if (a.answer == "ok") {
      spdlog::info("told {} that this host's ranks ended (exit {})", where, done.code);
      return true;
    }
    if (!a.answer.empty()) {
      spdlog::error("{} refused this host's report: {}", where, printable(a.answer, 300));
      return false;
    }
    last = a.error;
    if (stop && stop()) break;
    const auto pause = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(backoff.next()));
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
  }
  spdlog::warn("could not tell {} that this host's ranks ended ({}, last: {}): it releases the workers once "
               "--release-wait has passed after its own ranks ended",
               where, counted(attempts, "attempt"), last);
  return false;
}

}  // namespace tandem::launch
