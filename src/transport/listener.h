// The data worker's own listening socket (the gRPC server gets each connection it keeps
// through grpc_server_add_channel_from_fd), so that the worker decides which connections
// it takes. gRPC 1.51's own listener takes any number, and stops accepting for good after
// one accept() that fails for want of descriptors (CVE-2023-4785): idle connections from
// anyone could exhaust the worker's descriptors, and a worker out of them once never
// served again. Here:
// - at most max_connections are open at once; one more is closed at once (the caller
//   sees its connection close, not a hang), said in the log, a line per 100 refusals;
// - a connection is given to gRPC only once it has sent something (a gRPC client sends
//   HTTP/2's preface at once): one silent for first_bytes_s is closed, so connections
//   that never speak cannot hold the places (gRPC keeps those for good);
// - an accept() that fails for want of a resource (EMFILE, ENFILE, ENOBUFS, ENOMEM)
//   waits a moment and tries again, said once per episode.
// Plain TCP: gRPC takes descriptors only for connections without TLS; a worker with TLS
// keeps gRPC's own listener.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tandem/common/clock.h"

namespace tandem::transport {

struct ListenerOptions {
  int max_connections = 1024;  // open at once (--max-connections)
  double retry_s = 0.1;        // the pause after an accept() that failed for want of a resource
  double first_bytes_s = 5;    // a connection that sends nothing this long is closed
};

// max_connections by default: a quarter of the open-files limit (the rest for the data
// files, the dataset's processes and everything else), 16 at least, 16384 at most.
int default_max_connections();

class Listener {
 public:
  // Binds `address` ("host:port", "[v6]:port"; port 0: a free one) and listens; a
  // wildcard host (0.0.0.0, [::], *) listens on IPv4 and IPv6 alike, as gRPC does.
  // Null when it cannot be bound (the caller says why: bind_failure()).
  static std::unique_ptr<Listener> open(const std::string& address, ListenerOptions opts);
  ~Listener();  // stop()
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  int port() const { return port_; }
  // Accepts on its own thread until stop(), handing each connection it keeps to `take`,
  // which owns the descriptor from then on. REQUIRES: called once.
  void start(std::function<void(int fd)> take);
  // Stops accepting and closes the listening sockets; connections given away stay.
  void stop();

  // Connections given away that are still open.
  int open_connections();
  // "ipv4:a.b.c.d:port" (or "ipv6:[..]:port") for gRPC's name of a connection it was
  // given ("fd:N", what ServerContext::peer() says of it); `peer` itself otherwise.
  std::string address_of(const std::string& peer) const;
  uint64_t refused() const { return refused_; }

 private:
  Listener(std::vector<int> fds, int port, ListenerOptions opts);
  struct Pending {  // accepted, not yet given: nothing read from it yet
    int fd;
    Clock::time_point since;
    std::string peer;
  };
  void run(const std::function<void(int fd)>& take);
  void accept_one(int listen_fd);
  // Gives the pending connections that spoke to `take`, closes those that hung up or
  // stayed silent too long; the milliseconds until the next one's deadline (-1: none).
  int settle(const std::vector<short>& events, const std::function<void(int fd)>& take);
  bool room();  // whether one more may open; forgets the closed ones first when full

  std::vector<int> fds_;  // the listening sockets
  int port_ = 0;
  ListenerOptions opts_;
  int wake_[2] = {-1, -1};  // a pipe: stop() ends the wait in poll()
  std::thread thread_;
  mutable std::mutex mu_;
  std::set<ino_t> given_;  // GUARDED_BY(mu_): the sockets handed over, by inode
  // GUARDED_BY(mu_): each descriptor's peer when accepted (a descriptor open with gRPC
  // cannot be another connection's)
  std::map<int, std::string> peers_;
  std::atomic<uint64_t> refused_{0};
  bool starved_ = false;  // the accept thread's: the last accept() lacked a resource
  std::vector<Pending> pending_;  // the accept thread's
  uint64_t silent_ = 0;   // the accept thread's: connections closed for sending nothing
};

}  // namespace tandem::transport
