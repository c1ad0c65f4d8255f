// Internal to the transport: the channel a trainer (or a host's stream relay) opens to a
// data worker, and how a call's status reads to the feed.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "tandem/transport/options.h"
#include "tandem/transport/worker_client.h"

namespace tandem::transport {

// A channel to `target` with its own connection, TLS when `security` names a CA,
// messages of any size, keepalive pings and reconnect pauses the feed's retries expect.
std::shared_ptr<grpc::Channel> make_worker_channel(const std::string& target, const SecurityOptions& security);

// A channel to a host's stream relay ("unix:PATH"): local, so without TLS.
std::shared_ptr<grpc::Channel> make_relay_channel(const std::string& address);

// Failures a retry can cure: the worker restarted, the network glitched, it was busy.
bool transient(const grpc::Status& s);

// A peer's status, with its message made printable: it is the peer's words.
std::string describe(const grpc::Status& status);

// OK, or transient or final with describe()'s message.
CallStatus status_of(const grpc::Status& s);

}  // namespace tandem::transport
