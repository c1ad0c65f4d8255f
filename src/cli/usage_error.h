// Command-line mistakes: one message, the nearest valid name, exit code 2 (usage).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tandem/common/exit_codes.h"

namespace tandem::cli {

// The candidate nearest to `word` if it is a likely typo of it (at most a third of its
// length in edits, at least one); else "".
std::string nearest_name(const std::string& word, const std::vector<std::string>& candidates);

// What to tell the user about a parse error of `argv` against `app`: CLI11's message,
// plus "did you mean ..." for an unknown command or flag.
std::string usage_message(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv);

// For a command that runs the user's program (launch, train, simulate): `--` with nothing
// after it, or the program given without `--` before it (its own flags would be taken as
// tandem's); else "". REQUIRES: `app` parsed `argv`, before settings files are applied.
std::string separator_problem(const CLI::App& app, int argc, char** argv);

// The words after the first `--` as they were given, for a command that runs the user's
// program; nullopt when there is no `--` or the command runs none. CLI11 2.1 splits a
// word like "[a,b]" in two as it collects them; these replace what it collected.
std::optional<std::vector<std::string>> words_after_separator(const CLI::App& app, int argc, char** argv);

}  // namespace tandem::cli
