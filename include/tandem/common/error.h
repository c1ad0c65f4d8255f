// Error types. tandem throws, like LibTorch, CLI11 and nlohmann_json do, and catches
// at the edges: in each gRPC handler (-> grpc::Status) and in main (-> exit code and
// output/failure).
#pragma once

#include <stdexcept>
#include <string>

namespace tandem {

// Bad input from a user: a config file, environment, flag or data file. The message
// names the problem and the fix.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A peer misbehaved or vanished, or a deadline passed.
class NetworkError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A wait was cut short by SIGTERM or SIGINT: the caller stops cleanly (exit 2).
class Interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Training produced a loss that is not a finite number: stop, keep the last good
// checkpoint, write no new one.
class Diverged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Wraps `what` with context as an error climbs: "loading resourceconfig.json: <what>".
std::string with_context(const std::string& context, const std::exception& e);

}  // namespace tandem
