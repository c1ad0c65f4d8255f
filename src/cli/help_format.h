// How `tandem CMD --help` shows options.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

namespace tandem::cli {

// CLI11's formatter, except that a flag with an off switch (--fused-optimizer,
// --no-fused-optimizer) is shown by its names alone: CLI11 appends the value the off
// switch sets ("{false}"), which reads as the default. Such flags say their default in
// their description. Set on the top-level app before the commands are added: they
// inherit it.
std::shared_ptr<CLI::Formatter> help_formatter();

}  // namespace tandem::cli
