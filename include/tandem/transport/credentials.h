// Who may speak to a data worker, in one place: the job token carried as gRPC metadata
// (`authorization: Bearer TOKEN`), the job name (`tandem-job`), and optional TLS. Both
// sides of every RPC go through these functions. See docs/security.md.
#pragma once

#include <memory>
#include <string>

#include "tandem/common/settings.h"

namespace grpc {
class ChannelCredentials;
class ClientContext;
class ServerContext;
class ServerCredentials;
class Status;
}  // namespace grpc

namespace tandem::transport {

// TLS when the settings name a certificate (server) or a CA (client), else insecure.
// Throws ConfigError naming a PEM file that cannot be read.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const SecurityOptions& s);
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const SecurityOptions& s);

// Adds the token and the job name to an outgoing call.
void authorise(grpc::ClientContext& ctx, const SecurityOptions& s);

// OK when the caller carries this worker's token (compared in constant time) and, when
// the worker belongs to a job, that job's name; else UNAUTHENTICATED or
// PERMISSION_DENIED with a message that says which and what to do.
grpc::Status check_caller(const grpc::ServerContext& ctx, const SecurityOptions& s);

// True when `address` (host[:port]) is a loopback address: the data plane is private
// there even without a token.
bool is_loopback(const std::string& address);

// Fills s.token from s.token_file when one is named, and checks the token and job name
// can travel as gRPC headers. Throws ConfigError for an unreadable or empty token file
// or an unprintable token or job name.
void resolve_security(SecurityOptions& s);

}  // namespace tandem::transport
