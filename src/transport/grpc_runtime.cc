#include "tandem/transport/grpc_runtime.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

namespace tandem::transport {

void route_grpc_logs() {
  static std::once_flag once;
  std::call_once(once, [] {
    gpr_set_log_function([](gpr_log_func_args* a) {
      spdlog::debug("grpc {} {}:{}: {}", gpr_log_severity_string(a->severity), a->file ? a->file : "?", a->line,
                    a->message ? a->message : "");
    });
  });
}

void keep_grpc_initialised() {
  static std::once_flag once;
  std::call_once(once, [] { grpc_init(); });
}

std::string bind_failure(const std::string& address, const std::string& flag) {
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  const std::string port = colon == std::string::npos ? address : address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  // What binding it ourselves says: gRPC's own message is only in its log.
  std::string why = "the address cannot be bound";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() || host == "*" ? nullptr : host.c_str(), port.c_str(), &hints, &found) == 0 && found) {
    const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    if (fd >= 0) {
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) {
        why = errno == EADDRINUSE ? "port " + port + " is taken by another process (" + std::strerror(errno) + ")"
                                  : std::strerror(errno);
      }
      close(fd);
    }
    freeaddrinfo(found);
  }
  return fmt::format("cannot listen on {}: {}: choose a free port with {}", address, why, flag);
}

}  // namespace tandem::transport
