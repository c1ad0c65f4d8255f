#include <grpc/grpc.h>

#include "tandem/cli/commands.h"

int main(int argc, char** argv) {
  // Keep gRPC initialised until the process exits: otherwise the last server or channel
  // to go runs gRPC's global shutdown, which can wait ~10 s for its executor's timers,
  // and a worker told to stop would linger that long.
  grpc_init();
  return tandem::cli::run_cli(argc, argv);
}
