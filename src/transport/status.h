// Internal to the transport: an error as the gRPC status a data worker answers with.
#pragma once

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include <grpcpp/support/status.h>

#include "tandem/common/error.h"

namespace tandem::transport {

// `doing` says what failed ("making batch 12"). Data that cannot be used (an undecodable
// file) is DATA_LOSS; a request that cannot be served (bad settings, an index out of
// range, a malformed message) INVALID_ARGUMENT; the trainer retries neither; memory or a limit (Overloaded) is
// RESOURCE_EXHAUSTED; a
// lost peer or a passed deadline UNAVAILABLE; a stop CANCELLED; anything else INTERNAL.
inline grpc::Status status_for(const std::exception& e, const std::string& doing) {
  const std::string what = std::string("data worker, ").append(with_context(doing, e));
  if (dynamic_cast<const std::bad_alloc*>(&e)) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED, std::string("data worker, ").append(doing).append(": out of memory")};
  }
  if (dynamic_cast<const Overloaded*>(&e)) return {grpc::StatusCode::RESOURCE_EXHAUSTED, what};
  if (dynamic_cast<const DataError*>(&e)) return {grpc::StatusCode::DATA_LOSS, what};
  if (dynamic_cast<const ConfigError*>(&e) || dynamic_cast<const DataError*>(&e) ||
      dynamic_cast<const PeerError*>(&e) || dynamic_cast<const std::out_of_range*>(&e)) {
    return {grpc::StatusCode::INVALID_ARGUMENT, what};
  }
  if (dynamic_cast<const NetworkError*>(&e)) return {grpc::StatusCode::UNAVAILABLE, what};
  if (dynamic_cast<const Interrupted*>(&e)) return {grpc::StatusCode::CANCELLED, what};
  return {grpc::StatusCode::INTERNAL, what};
}

}  // namespace tandem::transport
