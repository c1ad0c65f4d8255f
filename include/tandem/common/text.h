// Text that came from outside (a peer, a file) made safe to print: control characters
// escaped, so a forged "step=... loss=..." line or a terminal escape cannot reach a log
// as such, and long values shortened, so one bad value cannot flood a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

// `s` with bytes below 0x20, 0x7f and backslash escaped (\n, \t, \\, \xNN), cut to about
// `max_chars` with "... (N bytes)" appended when longer.
std::string printable(std::string_view s, size_t max_chars = 200);

// The candidate nearest to `word` by edit distance when it is within `max_distance` edits
// (and not `word` itself), else "": for "did you mean ...?" after a typo.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates, size_t max_distance);

// "1 thread", "4 threads": `n` and the noun in the number it needs. `many` defaults to
// `one` + "s" ("process" needs "processes", "GPU" "GPUs").
std::string counted(uint64_t n, std::string_view one, std::string_view many = {});

}  // namespace tandem
