#include "tandem/transport/grpc_runtime.h"

#include <mutex>

#include <grpc/grpc.h>

namespace tandem::transport {

void keep_grpc_initialised() {
  static std::once_flag once;
  std::call_once(once, [] { grpc_init(); });
}

}  // namespace tandem::transport
