// tandem's exit codes, in one place (docs/configuration.md, "Exit codes").
#pragma once

namespace tandem {

inline constexpr int kExitOk = 0;           // the role finished its work
inline constexpr int kExitFailed = 1;       // it failed; output/failure says why
inline constexpr int kExitInterrupted = 2;  // SIGTERM/SIGINT before the work was done
inline constexpr int kExitUsage = 2;        // a command-line mistake, before anything ran

}  // namespace tandem
