// Internal to the flags (options.cc, flag_checks.cc): the checks they share besides
// options.h's positive(), non_negative() and in_range().
#pragma once

#include <cstddef>
#include <cstdint>

#include <CLI/CLI.hpp>

namespace tandem::cli {

// A whole number in [lo, hi] written in decimal (CLI11's own reading takes "-5" as a huge
// unsigned number and "010" as octal).
CLI::Validator whole_number(uint64_t lo, uint64_t hi);

// Plain UTF-8 text without control characters, at most 16 KiB.
CLI::Validator plain_text();

// Every text option added to `app` after the first `before` takes only plain_text().
void limit_text(CLI::App& app, size_t before);

}  // namespace tandem::cli
