#include "channel.h"

#include <iterator>

#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"

namespace tandem::transport {
namespace {

const char* code_name(grpc::StatusCode code) {
  static const char* const names[] = {"OK",           "CANCELLED",          "UNKNOWN",        "INVALID_ARGUMENT",
                                      "DEADLINE_EXCEEDED", "NOT_FOUND",     "ALREADY_EXISTS", "PERMISSION_DENIED",
                                      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",  "OUT_OF_RANGE",
                                      "UNIMPLEMENTED", "INTERNAL",          "UNAVAILABLE",    "DATA_LOSS",
                                      "UNAUTHENTICATED"};
  const auto i = static_cast<size_t>(code);
  return i < std::size(names) ? names[i] : "UNKNOWN";
}


// Messages of any size, and reconnects as the feed's own retries expect (worker_link.h):
// gRPC's defaults (pauses growing to 120 s, 20 s per connection attempt) would let a
// worker whose network has healed wait a minute or more for its channel's next attempt.
grpc::ChannelArguments channel_args() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  return args;
}

}  // namespace

std::shared_ptr<grpc::Channel> make_worker_channel(const std::string& target, const SecurityOptions& security) {
  grpc::ChannelArguments args = channel_args();
  // Notice a worker host that vanished without closing its connections.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Each client gets its own connection, even to the same address.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A name dialled by gRPC itself (a host's stream relay dials workers by name) is looked
  // up again within a second of a lost connection, not gRPC's default 30 s: a worker pod
  // recreated at a new address is found as soon as it answers.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  if (!security.tls_server_name.empty()) args.SetSslTargetNameOverride(security.tls_server_name);
  return grpc::CreateCustomChannel(target, channel_credentials(security), args);
}

std::shared_ptr<grpc::Channel> make_relay_channel(const std::string& address) {
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), channel_args());
}

std::string describe(const grpc::Status& status) {
  return std::string("gRPC ") + code_name(status.error_code()) + ": " + printable(status.error_message(), 300);
}

bool transient(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
      return true;
    default:
      return false;  // wrong token or job, a request it cannot serve: the same again
  }
}

CallStatus status_of(const grpc::Status& s) {
  if (s.ok()) return {};
  return {transient(s) ? CallStatus::Kind::kTransient : CallStatus::Kind::kFinal, describe(s)};
}

}  // namespace tandem::transport
