// The one reader of the process environment. Settings that come from it are read at
// start: the launcher's variables into LauncherEnv (cluster::read_launcher_env), the
// tandem- settings by the command line (cli/options.h finish_settings); the few reads
// below the command line (a terminal's TERM, glibc's malloc tunables, the interpreter
// the wheel names) go through process_env too, so that `grep getenv` finds one place.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace tandem {

// One variable of the real process environment; nullopt when it is not set.
std::optional<std::string> process_env(const std::string& name);

// Reads one environment variable; injectable so tests need not touch the process env.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

}  // namespace tandem
