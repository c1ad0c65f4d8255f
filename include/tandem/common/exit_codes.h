// tandem's exit codes, in one place (docs/configuration.md, "Exit codes"). Each says
// whether running the same thing again can help, so that a scheduler's rule can act on
// it: Slurm's RequeueExit, a Kubernetes Job's podFailurePolicy, a SageMaker retry.
#pragma once

namespace tandem {

inline constexpr int kExitOk = 0;       // the role finished its work
inline constexpr int kExitFailed = 1;   // it failed otherwise; output/failure says why
inline constexpr int kExitUsage = 2;    // the command line cannot be parsed: nothing ran
inline constexpr int kExitConfig = 3;   // a flag's value, a settings or cluster file, the environment
inline constexpr int kExitData = 4;     // a data file or the user's dataset code
inline constexpr int kExitPeer = 5;     // a peer was unreachable, refused, or broke the protocol
// SIGTERM/SIGINT before the work was done, after the checkpoint it allows: run the same
// job again to resume (BSD's EX_TEMPFAIL, "try again later").
inline constexpr int kExitInterrupted = 75;

}  // namespace tandem
