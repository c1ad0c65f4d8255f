// Reaching a host: --host-map overrides and DNS resolution with retries.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "tandem/common/clock.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/common/error.h"
#include "tandem/common/signals.h"
#include "tandem/common/text.h"

namespace tandem::cluster {
namespace {

struct MapEntry {
  std::string address;
  std::optional<int> port;
  std::string text;  // as written, for messages
};

[[noreturn]] void malformed(const std::string& entry, const std::string& problem) {
  throw ConfigError("--host-map entry \"" + entry + "\": " + problem +
                    ". Fix: write each entry as name=addr[:port], e.g. "
                    "algo-1=127.0.0.1:6001");
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

int parse_port(const std::string& text, const std::string& entry) {
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
    malformed(entry, "port \"" + text + "\" is not a number from 1 to 65535");
  }
  return port;
}

// "addr", "addr:port", "[v6]" or "[v6]:port"; a bare address with several colons is IPv6.
MapEntry parse_target(const std::string& target, const std::string& entry) {
  MapEntry out{target, std::nullopt, entry};
  if (target.starts_with("[")) {
    const auto close = target.find(']');
    if (close == std::string::npos) malformed(entry, "\"[\" without \"]\"");
    out.address = target.substr(1, close - 1);
    const std::string rest = target.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') malformed(entry, "unexpected text after \"]\"");
    if (!rest.empty()) out.port = parse_port(rest.substr(1), entry);
  } else if (std::count(target.begin(), target.end(), ':') == 1) {
    const auto colon = target.find(':');
    out.address = target.substr(0, colon);
    out.port = parse_port(target.substr(colon + 1), entry);
  }
  if (out.address.empty()) malformed(entry, "the address is empty");
  return out;
}

// Entries may also hold comma-separated lists, as TANDEM_HOST_MAP does.
std::map<std::string, MapEntry> parse_host_map(const std::vector<std::string>& entries) {
  std::map<std::string, MapEntry> map;
  for (const auto& list : entries) {
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = std::min(list.find(',', start), list.size());
      const std::string entry = trim(list.substr(start, comma - start));
      start = comma + 1;
      if (entry.empty()) continue;
      const auto eq = entry.find('=');
      if (eq == std::string::npos) malformed(entry, "no \"=\" between name and address");
      const std::string name = trim(entry.substr(0, eq));
      if (name.empty()) malformed(entry, "the host name is empty");
      MapEntry target = parse_target(trim(entry.substr(eq + 1)), entry);
      auto [it, fresh] = map.emplace(name, target);
      if (!fresh && (it->second.address != target.address || it->second.port != target.port)) {
        malformed(entry, "host " + name + " is already mapped by \"" + it->second.text + "\"");
      }
    }
  }
  return map;
}

struct Lookup {
  std::vector<std::string> addresses;  // empty on failure
  std::string error;
};

// Every address of `host`, numeric, without repeats, in the resolver's order: IPv4 ones
// when there are any (cluster networks and --host-map speak it, and it keeps targets
// simple), else IPv6.
Lookup lookup_once(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    return {{}, gai_strerror(rc)};
  }
  bool any_v4 = false;
  for (const addrinfo* p = found; p != nullptr; p = p->ai_next) any_v4 |= p->ai_family == AF_INET;
  Lookup out;
  for (const addrinfo* p = found; p != nullptr; p = p->ai_next) {
    if (any_v4 && p->ai_family != AF_INET) continue;
    char buf[NI_MAXHOST];
    if (int rc = getnameinfo(p->ai_addr, p->ai_addrlen, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST); rc != 0) {
      out.error = gai_strerror(rc);
      continue;
    }
    if (std::find(out.addresses.begin(), out.addresses.end(), buf) == out.addresses.end()) out.addresses.push_back(buf);
  }
  freeaddrinfo(found);
  return out;
}

// getaddrinfo cannot be interrupted and may block for the resolver's own timeouts, so it
// runs on a detached thread and the caller waits only as long as its deadline allows.
std::shared_future<Lookup> start_lookup(const std::string& host) {
  auto promise = std::make_shared<std::promise<Lookup>>();
  std::shared_future<Lookup> result = promise->get_future().share();
  std::thread([promise, host] { promise->set_value(lookup_once(host)); }).detach();
  return result;
}

bool is_numeric(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

std::string Endpoint::target() const {
  const bool v6 = address.find(':') != std::string::npos;
  return (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

Endpoint worker_endpoint(const std::string& host, const ClusterOptions& opts) {
  if (opts.worker_port < 1 || opts.worker_port > 65535) {
    throw ConfigError("--worker-port " + std::to_string(opts.worker_port) +
                      ": not a port. Fix: pass a number from 1 to 65535");
  }
  const auto map = parse_host_map(opts.host_map);
  Endpoint endpoint{host, host, opts.worker_port};
  if (auto it = map.find(host); it != map.end()) {
    endpoint.address = it->second.address;
    endpoint.port = it->second.port.value_or(opts.worker_port);
  }
  return endpoint;
}

bool is_worker_address(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  const std::string host = target.substr(0, colon), port = target.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return false;
  }
  if (host.front() == '[') {
    return host.back() == ']' && host.size() > 2 &&
           host.find_first_not_of("0123456789abcdefABCDEF:.", 1) == host.size() - 1;
  }
  return host.size() <= 253 &&
         host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") ==
             std::string::npos;
}

std::string worker_target(const std::string& entry, int port, const std::string& setting) {
  const std::string target = with_default_port(entry, port);
  if (!is_worker_address(target)) {
    throw ConfigError(setting + " \"" + printable(entry, 80) + "\" is not one address. Fix: write host[:port] "
                      "entries, e.g. cpu-1:6000 or [fd00::1]:6000, or dns:NAME[:PORT] for a DNS name");
  }
  return target;
}

std::string with_default_port(const std::string& target, int port) {
  const std::string p = std::to_string(port);
  if (target.starts_with("[")) return target.find("]:") == std::string::npos ? target + ":" + p : target;
  const auto colons = std::count(target.begin(), target.end(), ':');
  if (colons == 1) return target;
  if (colons > 1) return "[" + target + "]:" + p;  // a bare IPv6 address
  return target + ":" + p;
}

namespace {

constexpr auto kStopSlice = std::chrono::milliseconds(100);

void throw_if_stopped(const std::string& host) {
  if (stop_signal_pending()) throw Interrupted("stopped while resolving host \"" + host + "\"");
}

}  // namespace

std::vector<std::string> resolve_all(const std::string& host, double timeout_s) {
  if (is_numeric(host)) return {host};
  if (host == "localhost") return {"127.0.0.1"};
  const auto start = Clock::now();
  const auto deadline = start + seconds(timeout_s);
  // Host names appear in DNS a little after the job starts: retry, backing off to 2 s.
  auto delay = std::chrono::milliseconds(250);
  std::string last_error;
  while (true) {
    // Even the last attempt, or one with no time left, gets a moment to answer.
    const auto wait = std::max(deadline, Clock::now() + std::chrono::milliseconds(200));
    auto attempt = start_lookup(host);
    // In slices: a stop (SIGTERM, blocked until the role's watcher takes it) ends the wait.
    while (attempt.wait_until(std::min(wait, Clock::now() + kStopSlice)) != std::future_status::ready &&
           Clock::now() < wait) {
      throw_if_stopped(host);
    }
    if (attempt.wait_until(Clock::now()) != std::future_status::ready) {
      if (last_error.empty()) last_error = "the resolver did not answer in time";
      break;
    }
    const Lookup result = attempt.get();
    if (!result.addresses.empty()) return result.addresses;
    last_error = result.error;
    if (Clock::now() >= deadline) break;
    for (const auto until = std::min(Clock::now() + delay, deadline); Clock::now() < until;) {
      throw_if_stopped(host);
      std::this_thread::sleep_until(std::min(until, Clock::now() + kStopSlice));
    }
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f",
                std::chrono::duration<double>(Clock::now() - start).count());
  throw NetworkError("could not resolve host \"" + host + "\" after waiting " + waited + " s (" +
                     last_error + "). Fix: check the host name, map it to an address with "
                     "--host-map " + host + "=addr[:port], or wait longer with --resolve-timeout");
}

std::string resolve_host(const std::string& host, double timeout_s) { return resolve_all(host, timeout_s).front(); }

namespace {

constexpr std::string_view kDnsPrefix = "dns:";

// NAME[:PORT] as `flag` gave it (shown in errors as `shown`).
WorkerService parse_service(const std::string& text, const std::string& shown, int default_port) {
  WorkerService s{text, default_port};
  if (const size_t colon = text.rfind(':'); colon != std::string::npos) {
    s.name = text.substr(0, colon);
    const std::string digits = text.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), s.port);
    if (ec != std::errc() || end != digits.data() + digits.size() || s.port < 1 || s.port > 65535) {
      throw ConfigError(shown + ": \"" + printable(digits, 20) + "\" is not a port. Fix: write NAME or NAME:PORT with a port from 1 "
                        "to 65535, e.g. tandem-workers.default.svc:6000");
    }
  }
  if (s.name.empty() || s.name.size() > 253 ||
      s.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
          std::string::npos) {
    throw ConfigError(shown + ": not a DNS name. Fix: name a DNS record with one address per worker, e.g. a "
                      "Kubernetes headless Service: tandem-workers.default.svc");
  }
  return s;
}

}  // namespace

std::vector<WorkerService> worker_services(const std::vector<std::string>& workers, const std::string& service,
                                           const ClusterOptions& opts) {
  std::vector<WorkerService> out;
  for (const std::string& w : workers) {
    if (w.starts_with(kDnsPrefix)) {
      out.push_back(parse_service(w.substr(kDnsPrefix.size()), "--workers " + printable(w, 80), opts.worker_port));
    }
  }
  if (!service.empty()) {
    out.push_back(parse_service(service, "--worker-service " + printable(service, 80), opts.worker_port));
  }
  return out;
}

std::vector<std::string> explicit_worker_targets(const std::vector<std::string>& workers,
                                                 const std::string& service, const ClusterOptions& opts,
                                                 const Resolver& resolve) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& target) {
    if (std::find(out.begin(), out.end(), target) == out.end()) out.push_back(target);
  };
  for (const std::string& w : workers) {
    if (w.empty()) throw ConfigError("--workers lists an empty address. Fix: write host[:port],host[:port],...");
    if (!w.starts_with(kDnsPrefix)) add(worker_target(w, opts.worker_port, "--workers"));
  }
  for (const WorkerService& s : worker_services(workers, service, opts)) {
    for (const std::string& address : resolve(s.name, opts.resolve_timeout_s)) add(Endpoint{s.name, address, s.port}.target());
  }
  return out;
}

namespace {

// "a.b.c.d" or "[v6]" for a numeric address (a v4-mapped one as IPv4); "" otherwise.
std::string canonical_address(const std::string& address) {
  unsigned char buf[sizeof(in6_addr)];
  char text[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, address.c_str(), buf) == 1) return inet_ntop(AF_INET, buf, text, sizeof text);
  if (inet_pton(AF_INET6, address.c_str(), buf) != 1) return "";
  in6_addr v6;
  std::memcpy(&v6, buf, sizeof v6);
  if (IN6_IS_ADDR_V4MAPPED(&v6)) return inet_ntop(AF_INET, buf + 12, text, sizeof text);
  return "[" + std::string(inet_ntop(AF_INET6, buf, text, sizeof text)) + "]";
}

}  // namespace

std::string worker_identity(const std::string& target, const Resolver& resolve, double timeout_s) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0) return target;
  const std::string port = target.substr(colon + 1);
  int number = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
  if (ec != std::errc() || end != port.data() + port.size() || number < 1 || number > 65535) return target;
  std::string host = target.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return target;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return target;  // an IPv6 address without brackets: not a target
  }
  if (!is_numeric(host)) {
    if (!resolve) return target;
    try {
      const std::vector<std::string> found = resolve(host, timeout_s);
      if (found.empty()) return target;
      host = found.front();
    } catch (const NetworkError&) {
      return target;  // not resolvable (yet): known by its name
    }
  }
  const std::string address = canonical_address(host);
  return address.empty() ? target : address + ":" + std::to_string(number);
}

std::vector<std::string> group_worker_targets(const std::vector<std::string>& worker_hosts,
                                              const ClusterOptions& opts) {
  std::vector<std::string> targets;
  // Names stay names: the feed looks each up again whenever it dials the worker anew
  // (a pod recreated at a new address), and one that does not resolve yet (a pod still
  // pending) joins when it does while the others serve.
  for (const std::string& host : worker_hosts) targets.push_back(worker_endpoint(host, opts).target());
  return targets;
}

}  // namespace tandem::cluster
