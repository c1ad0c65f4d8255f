// Errors. tandem throws, like LibTorch, CLI11 and nlohmann_json do, and catches at the
// edges: in each gRPC handler (-> a grpc::Status, transport/status.h), in each role (->
// an exit code, exit_code() below, and output/failure) and in the Python module (-> a
// Python exception). Every error tandem raises on purpose is a tandem::Error whose
// message says what went wrong and what to do about it; with_context() prefixes what
// was being done as it climbs ("asking data worker 10.0.0.3:6000 for batch 12: ...").
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace tandem {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from a user: a config file, environment, flag or data setting. The message
// names the problem and the fix.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A peer vanished or did not answer in time, or a deadline passed. Often transient.
class NetworkError : public Error {
 public:
  using Error::Error;
};

// A peer answered with something that breaks the protocol: a batch whose shape, labels
// or size do not fit, an unknown dtype, an unusable dataset description. Retrying the
// same peer does not help.
class PeerError : public Error {
 public:
  using Error::Error;
};

// A request over one of this process's limits (samples per request, open streams,
// bytes in flight): the message names the limit's flag. Asking for less, or later, helps.
class Overloaded : public Error {
 public:
  using Error::Error;
};

// A data file that cannot be used (undecodable, truncated, changed since indexing).
class DataError : public Error {
 public:
  using Error::Error;
};

// A wait was cut short by SIGTERM or SIGINT: the caller stops cleanly (exit 75).
class Interrupted : public Error {
 public:
  using Error::Error;
};

// Training produced a loss that is not a finite number: stop, keep the last good
// checkpoint, write no new one.
class Diverged : public Error {
 public:
  using Error::Error;
};

// Wraps `what` with context as an error climbs: "loading resourceconfig.json: <what>".
std::string with_context(const std::string& context, const std::exception& e);

// The process exit code for an error that ends a command (common/exit_codes.h): 75 for
// Interrupted, 3 for ConfigError, 4 for DataError, 5 for a peer's, else 1.
int exit_code(const std::exception& e) noexcept;

}  // namespace tandem
