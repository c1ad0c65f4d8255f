// gRPC's process-wide runtime.
#pragma once

namespace tandem::transport {

// Keeps gRPC initialised until the process exits. Otherwise the last server or channel
// to go runs gRPC's global shutdown, which can wait ~10 s for its executor's timers, and
// a worker told to stop would linger that long. Idempotent.
// REQUIRES: call after SignalWatcher, so gRPC's threads inherit the blocked signals.
void keep_grpc_initialised();

}  // namespace tandem::transport
