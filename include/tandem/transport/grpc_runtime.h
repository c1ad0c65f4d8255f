// gRPC's process-wide runtime.
#pragma once

#include <string>

namespace tandem::transport {

// Keeps gRPC initialised until the process exits. Otherwise the last server or channel
// to go runs gRPC's global shutdown, which can wait ~10 s for its executor's timers, and
// a worker told to stop would linger that long. Idempotent.
// REQUIRES: call after SignalWatcher, so gRPC's threads inherit the blocked signals.
void keep_grpc_initialised();

// gRPC's own log lines (a failed bind's "E1128 ... chttp2_server" among them) go to
// tandem's log at debug level: what matters of them reaches the user as tandem's own
// error, which names the fix. Idempotent; call before the first server or channel.
void route_grpc_logs();

// The message for a server that could not listen on `address` ("host:port"): why (the
// port taken by another process, or the bind's own error) and the fix, `flag`.
std::string bind_failure(const std::string& address, const std::string& flag);

}  // namespace tandem::transport
