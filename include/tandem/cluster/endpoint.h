// Reaching hosts: a data worker's address and port (--host-map, --worker-port), workers
// named directly (--workers, --worker-service), and host names resolved with retries.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tandem/cluster/options.h"


namespace tandem::cluster {

// How to reach one host's data worker.
struct Endpoint {
  std::string host;  // the name as the cluster knows it
  std::string address;  // what to dial: the host itself or its --host-map entry
  int port = 0;
  std::string target() const;  // "address:port"
};

// Applies --host-map (name=addr[:port]); the port defaults to opts.worker_port.
Endpoint worker_endpoint(const std::string& host, const ClusterOptions& opts);

// "host" -> "host:port", a bare IPv6 address -> "[addr]:port"; a target with a port
// ("host:6001", "[::1]:6001") stays as it is. For --workers and the Python feed's
// workers, where a missing port means the worker port, not gRPC's default 443.
std::string with_default_port(const std::string& target, int port);

// Whether `target` is one worker's address: host:port with a host of letters, digits,
// '.', '-' and '_' (253 at most) or a bracketed IPv6 address, and a port 1..65535.
bool is_worker_address(const std::string& target);

// with_default_port(entry, port), checked: throws ConfigError naming `setting` ("--workers",
// "workers=") and the fix when it is not one worker's address (is_worker_address).
std::string worker_target(const std::string& entry, int port, const std::string& setting);

// Resolves a host name, retrying until `timeout_s` passes (DNS lags at job start).
// Returns the numeric address. Throws NetworkError naming the host after the deadline.
std::string resolve_host(const std::string& host, double timeout_s);

// Every address of `host` (IPv4 ones when it has any, else IPv6), retrying as
// resolve_host does: a Kubernetes headless Service names one address per ready pod.
std::vector<std::string> resolve_all(const std::string& host, double timeout_s);

// A DNS name that stands for every data worker, each address one worker on `port`:
// --worker-service NAME[:PORT], or an entry dns:NAME[:PORT] of --workers.
struct WorkerService {
  std::string name;
  int port = 0;
};
// Every such name given (the port defaults to --worker-port). Throws ConfigError naming
// the entry and the fix for a bad port or a name that is not a DNS name.
std::vector<WorkerService> worker_services(const std::vector<std::string>& workers, const std::string& service,
                                           const ClusterOptions& opts);

// The data workers a trainer was told of explicitly: --workers host[:port],... (the
// port defaults to --worker-port) and every address of each worker_services() name.
// `resolve` is injectable for tests. Empty when neither is set.
using Resolver = std::function<std::vector<std::string>(const std::string& host, double timeout_s)>;
std::vector<std::string> explicit_worker_targets(const std::vector<std::string>& workers,
                                                 const std::string& service, const ClusterOptions& opts,
                                                 const Resolver& resolve = resolve_all);

// What tells one data worker from another, whatever it is called: "a.b.c.d:port" or
// "[v6]:port" for a target whose host is an address or a name `resolve` answers for
// within `timeout_s` (its first address, the one a client dials); a v4-mapped IPv6
// address as its IPv4 one, the port without leading zeros. "localhost:6001",
// "127.0.0.1:6001" and "[::ffff:127.0.0.1]:06001" are one worker. A target with no port,
// or whose name does not resolve (or with no `resolve`), is its own identity.
std::string worker_identity(const std::string& target, const Resolver& resolve, double timeout_s);

// The worker groups' hosts as a trainer dials them: each through --host-map and
// --worker-port (worker_endpoint), a name left a name (the feed looks it up whenever it
// dials the worker anew). What `tandem launch` gives its trainer, and tandem.Feed()
// finds on SageMaker.
std::vector<std::string> group_worker_targets(const std::vector<std::string>& worker_hosts,
                                              const ClusterOptions& opts);

}  // namespace tandem::cluster
