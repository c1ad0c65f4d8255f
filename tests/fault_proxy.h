// A TCP proxy on loopback that a test breaks on purpose, between a trainer and a worker:
// it forwards bytes both ways until told to partition (on the connections there are,
// bytes are read and held and nothing is forwarded, as a network that drops packets looks
// to both ends; a new connection is reset at once, so the client's reconnect attempts
// fail and back off for as long as the partition lasts), heal (forwarding resumes, held
// bytes first), slow down (each chunk waits), or reset every connection (RST). Two
// threads per connection, so a stalled direction never blocks another.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tandem::testing {

class FaultProxy {
 public:
  // Forwards 127.0.0.1:port() to 127.0.0.1:target_port.
  explicit FaultProxy(int target_port) : target_(target_port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback(0);
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_, 64) != 0) {
      throw std::runtime_error("fault proxy: cannot listen");
    }
    socklen_t len = sizeof a;
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accepter_ = std::thread([this] { accept_loop(); });
  }

  ~FaultProxy() {
    done_ = true;
    ::shutdown(listen_, SHUT_RDWR);
    ::close(listen_);
    accepter_.join();
    std::lock_guard lock(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    for (auto& t : pumps_) t.join();
    for (int fd : fds_) ::close(fd);
  }

  int port() const { return port_; }
  void partition() { partitioned_ = true; }
  void heal() { partitioned_ = false; }
  void slow(std::chrono::milliseconds per_chunk) { delay_ms_ = static_cast<int>(per_chunk.count()); }

  // Every connection so far ends with a reset, as a middlebox that drops its state does.
  void reset_all() {
    std::lock_guard lock(mu_);
    for (int fd : fds_) {
      linger l{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      ::shutdown(fd, SHUT_RDWR);
    }
  }

 private:
  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }

  void accept_loop() {
    while (!done_) {
      const int client = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      if (partitioned_) {  // unreachable: the attempt fails
        linger l{1, 0};
        ::setsockopt(client, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        ::close(client);
        continue;
      }
      const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a = loopback(target_);
      if (::connect(upstream, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(client);
        ::close(upstream);
        continue;
      }
      std::lock_guard lock(mu_);
      if (done_) {
        ::close(client);
        ::close(upstream);
        return;
      }
      fds_.insert(fds_.end(), {client, upstream});
      pumps_.emplace_back([this, client, upstream] { pump(client, upstream); });
      pumps_.emplace_back([this, client, upstream] { pump(upstream, client); });
    }
  }

  // Copies `from` to `to` until either end closes; while partitioned, what was read waits.
  void pump(int from, int to) {
    std::vector<char> buf(64 * 1024);
    for (;;) {
      const ssize_t n = ::read(from, buf.data(), buf.size());
      if (n <= 0) break;
      while (partitioned_ && !done_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
      for (ssize_t sent = 0; sent < n;) {
        const ssize_t w = ::send(to, buf.data() + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
        if (w <= 0) {
          ::shutdown(from, SHUT_RDWR);
          return;
        }
        sent += w;
      }
    }
    ::shutdown(to, SHUT_RDWR);  // one end closed: so does the other
  }

  int target_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> done_{false};
  std::atomic<bool> partitioned_{false};
  std::atomic<int> delay_ms_{0};
  std::thread accepter_;
  std::mutex mu_;
  std::vector<int> fds_;             // GUARDED_BY(mu_)
  std::vector<std::thread> pumps_;   // GUARDED_BY(mu_)
};

}  // namespace tandem::testing
