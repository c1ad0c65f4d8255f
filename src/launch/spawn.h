// Internal to process supervision: fork and exec one child, its stdout and stderr on a
// pipe, in its own process group, killed if this process dies (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include "tandem/launch/process.h"

namespace tandem::launch {

// Forks and execs `spec`; returns its pid and sets `*read_fd` to the non-blocking read
// end of the pipe holding its stdout and stderr. Throws std::runtime_error for a bad spec
// or a failed fork. A child that cannot exec exits 127 after saying why on the pipe.
pid_t spawn(const ProcessSpec& spec, int* read_fd);

}  // namespace tandem::launch
