#include "listener.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <spdlog/spdlog.h>

namespace tandem::transport {
namespace {

constexpr int kMostConnections = 16384;

bool is_wildcard(const std::string& host) { return host.empty() || host == "*" || host == "0.0.0.0" || host == "::"; }

int port_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                 : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

// A socket bound to `a` (its port replaced by `port` when that is set) and listening; -1
// on failure, errno set. `dual`: an IPv6 socket that takes IPv4 too.
int listen_at(sockaddr_storage a, socklen_t len, int port, bool dual) {
  if (port > 0) {
    if (a.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = htons(static_cast<uint16_t>(port));
    else reinterpret_cast<sockaddr_in*>(&a)->sin_port = htons(static_cast<uint16_t>(port));
  }
  const int fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  const int one = 1, v6only = dual ? 0 : 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (a.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, SOMAXCONN) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

// The wildcard: IPv6 and IPv4 on one socket, or IPv4 alone where IPv6 is off.
std::vector<int> listen_everywhere(int port) {
  sockaddr_storage a{};
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
  v6->sin6_family = AF_INET6;
  v6->sin6_addr = in6addr_any;
  v6->sin6_port = htons(static_cast<uint16_t>(port));
  if (const int fd = listen_at(a, sizeof(sockaddr_in6), 0, /*dual=*/true); fd >= 0) return {fd};
  if (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL) return {};
  a = {};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(INADDR_ANY);
  v4->sin_port = htons(static_cast<uint16_t>(port));
  if (const int fd = listen_at(a, sizeof(sockaddr_in), 0, false); fd >= 0) return {fd};
  return {};
}

// Every address `host` names ("localhost": 127.0.0.1 and ::1), on one port; the first
// that binds picks it when `port` is 0. Empty when none binds.
std::vector<int> listen_on(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return {};
  std::vector<int> fds;
  int bound = 0;
  for (addrinfo* ai = found; ai; ai = ai->ai_next) {
    sockaddr_storage a{};
    std::memcpy(&a, ai->ai_addr, ai->ai_addrlen);
    const int fd = listen_at(a, ai->ai_addrlen, bound, false);
    if (fd < 0) continue;
    if (bound == 0) bound = port_of(fd);
    fds.push_back(fd);
  }
  freeaddrinfo(found);
  return fds;
}

std::string peer_of(const sockaddr_storage& a) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), sizeof a, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown address";
  }
  // As gRPC names its own peers.
  return a.ss_family == AF_INET6 ? "ipv6:[" + std::string(host) + "]:" + serv : "ipv4:" + std::string(host) + ":" + serv;
}

bool lacks_resource(int error) { return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM; }

// The inodes of this process's open sockets.
std::set<ino_t> open_sockets() {
  std::set<ino_t> out;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return out;
  char link[64];
  while (const dirent* e = readdir(dir)) {
    const ssize_t n = readlinkat(dirfd(dir), e->d_name, link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    unsigned long long inode = 0;
    if (std::sscanf(link, "socket:[%llu]", &inode) == 1) out.insert(static_cast<ino_t>(inode));
  }
  closedir(dir);
  return out;
}

}  // namespace

int default_max_connections() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return kMostConnections;
  return static_cast<int>(std::clamp<rlim_t>(limit.rlim_cur / 4, 16, kMostConnections));
}

std::unique_ptr<Listener> Listener::open(const std::string& address, ListenerOptions opts) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return nullptr;
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  std::vector<int> fds;
  if (is_wildcard(host)) {
    char* end = nullptr;
    const long number = std::strtol(port.c_str(), &end, 10);
    if (end == port.c_str() || *end != '\0' || number < 0 || number > 65535) return nullptr;
    fds = listen_everywhere(static_cast<int>(number));
  } else {
    fds = listen_on(host, port);
  }
  if (fds.empty()) return nullptr;
  const int bound = port_of(fds.front());
  return std::unique_ptr<Listener>(new Listener(std::move(fds), bound, opts));
}

Listener::Listener(std::vector<int> fds, int port, ListenerOptions opts) : fds_(std::move(fds)), port_(port), opts_(opts) {
  if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
}

Listener::~Listener() {
  stop();
  for (const int fd : wake_) {
    if (fd >= 0) close(fd);
  }
}

void Listener::start(std::function<void(int fd)> take) {
  thread_ = std::thread([this, take = std::move(take)] { run(take); });
}

void Listener::stop() {
  if (wake_[1] >= 0) {
    const char byte = 0;
    [[maybe_unused]] const ssize_t n = write(wake_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (const int fd : fds_) close(fd);
  fds_.clear();
  for (const Pending& p : pending_) close(p.fd);
  pending_.clear();
}

void Listener::run(const std::function<void(int fd)>& take) {
  const int retry_ms = std::max(1, static_cast<int>(opts_.retry_s * 1000));
  std::vector<pollfd> watched;
  for (int timeout = -1;;) {
    // Out of descriptors: the pending connection stays queued, and poll() would say so
    // again at once; wait a moment (for the stop pipe only) before the next try.
    pollfd stop{wake_[0], POLLIN, 0};
    if (starved_ && poll(&stop, 1, retry_ms) > 0) return;
    watched.clear();
    for (const int fd : fds_) watched.push_back({fd, POLLIN, 0});
    for (const Pending& p : pending_) watched.push_back({p.fd, POLLIN, 0});
    watched.push_back(stop);
    if (poll(watched.data(), watched.size(), timeout) < 0 && errno != EINTR) return;
    if (watched.back().revents != 0) return;
    std::vector<short> events;
    for (size_t i = fds_.size(); i + 1 < watched.size(); ++i) events.push_back(watched[i].revents);
    timeout = settle(events, take);  // before accepting: `events` are the pending ones so far
    const size_t before = pending_.size();
    for (size_t i = 0; i < fds_.size(); ++i) {
      if (watched[i].revents & POLLIN) accept_one(watched[i].fd);
    }
    if (pending_.size() > before) timeout = 0;  // at once: the new ones' data, and their deadlines
  }
}

int Listener::settle(const std::vector<short>& events, const std::function<void(int fd)>& take) {
  const auto now = Clock::now();
  const auto limit = seconds(opts_.first_bytes_s);
  std::vector<Pending> waiting;
  int next_ms = -1;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    const short ev = i < events.size() ? events[i] : 0;
    if (ev & POLLIN) {  // it spoke (or hung up after speaking): gRPC reads it from here
      take(p.fd);
    } else if (ev & (POLLHUP | POLLERR | POLLNVAL)) {
      close(p.fd);
    } else if (now - p.since >= limit) {
      if (++silent_ <= 5 || silent_ % 100 == 0) {
        spdlog::warn("closed a connection from {} that sent nothing in {} s (a gRPC client speaks at once); {} so far",
                     p.peer, opts_.first_bytes_s, silent_);
      }
      close(p.fd);
    } else {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(p.since + limit - now).count() + 1;
      next_ms = next_ms < 0 ? static_cast<int>(left) : std::min(next_ms, static_cast<int>(left));
      waiting.push_back(p);
    }
  }
  pending_ = std::move(waiting);
  return next_ms;
}

void Listener::accept_one(int listen_fd) {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (lacks_resource(errno) && !starved_) {
      rlimit limit{};
      getrlimit(RLIMIT_NOFILE, &limit);
      spdlog::error("cannot accept a connection on port {}: {} (this process may open {} files): it tries again every "
                    "{} s; raise the open-files limit (ulimit -n) or lower --max-connections",
                    port_, std::strerror(errno), static_cast<uint64_t>(limit.rlim_cur), opts_.retry_s);
    }
    starved_ = lacks_resource(errno);
    return;
  }
  if (starved_) spdlog::info("port {} accepts connections again", port_);
  starved_ = false;
  if (!room()) {
    const uint64_t n = ++refused_;
    if (n <= 5 || n % 100 == 0) {
      spdlog::warn("refused a connection from {}: {} are open, the most this worker takes (--max-connections); {} "
                   "refused so far",
                   peer_of(peer), opts_.max_connections, n);
    }
    close(fd);
    return;
  }
  struct stat st {};
  fstat(fd, &st);
  const std::string who = peer_of(peer);
  {
    std::lock_guard lock(mu_);
    given_.insert(st.st_ino);
    peers_[fd] = who;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  pending_.push_back({fd, Clock::now(), who});
}

bool Listener::room() {
  std::lock_guard lock(mu_);
  if (static_cast<int>(given_.size()) < opts_.max_connections) return true;
  const std::set<ino_t> open = open_sockets();
  std::erase_if(given_, [&](ino_t inode) { return !open.count(inode); });
  return static_cast<int>(given_.size()) < opts_.max_connections;
}

std::string Listener::address_of(const std::string& peer) const {
  if (!peer.starts_with("fd:")) return peer;
  std::lock_guard lock(mu_);
  const auto it = peers_.find(std::atoi(peer.c_str() + 3));
  return it == peers_.end() ? peer : it->second;
}

int Listener::open_connections() {
  std::lock_guard lock(mu_);
  const std::set<ino_t> open = open_sockets();
  std::erase_if(given_, [&](ino_t inode) { return !open.count(inode); });
  return static_cast<int>(given_.size());
}

}  // namespace tandem::transport
