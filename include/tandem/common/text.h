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

// `s` as one safe line: bytes below 0x20, 0x7f, backslash, C1 controls (U+0080 to U+009F)
// and every byte that is not part of well-formed UTF-8 escaped (\n, \t, \\, \xNN); other
// UTF-8 kept. Cut to about `max_chars` (never inside a character) with "... (N bytes)"
// appended when longer. Every message that quotes a value from outside goes through it.
std::string printable(std::string_view s, size_t max_chars = 200);

// A whole message that may quote printable() values already: printable() but for
// backslashes, which stay single (so an escaped value is not escaped twice). For
// messages from libraries (CLI11, a JSON parser) that quote input as it came.
std::string one_line(std::string_view message, size_t max_chars = 600);

// True when `s` is well-formed UTF-8 (ASCII included).
bool valid_utf8(std::string_view s);

// The candidate nearest to `word` by edit distance when it is within `max_distance` edits
// (and not `word` itself), else "": for "did you mean ...?" after a typo.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates, size_t max_distance);

// "1 thread", "4 threads": `n` and the noun in the number it needs. `many` defaults to
// `one` + "s" ("process" needs "processes", "GPU" "GPUs").
std::string counted(uint64_t n, std::string_view one, std::string_view many = {});

// `items` with `separator` between them: joined({"a", "b"}, ", ") is "a, b".
std::string joined(const std::vector<std::string>& items, std::string_view separator = ",");

// `s` cut at every `separator`, each piece without surrounding blanks; "" gives {}.
std::vector<std::string> split_trimmed(std::string_view s, char separator);

}  // namespace tandem
