#include "tandem/common/text.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace tandem {

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (2 to 4 bytes: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const unsigned c = at(i);
  const auto cont = [&](size_t k) { return (at(k) & 0xc0u) == 0x80u; };
  if (c >= 0xc2 && c <= 0xdf) return cont(i + 1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return at(i + 1) >= lo && at(i + 1) <= hi && cont(i + 2) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return at(i + 1) >= lo && at(i + 1) <= hi && cont(i + 2) && cont(i + 3) ? 4 : 0;
  }
  return 0;
}

void append_hex(std::string& out, unsigned char c) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "\\x%02x", c);
  out += hex;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string escaped(std::string_view s, size_t max_chars, bool backslashes) {
  std::string out;
  size_t i = 0;
  while (i < s.size() && out.size() < max_chars) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\' && backslashes) out += "\\\\";
    else if (c < 0x20 || c == 0x7f) append_hex(out, c);
    else if (c < 0x80) out += static_cast<char>(c);
    else if (const size_t n = utf8_sequence(s, i); n == 0) {
      append_hex(out, c);  // not UTF-8: the byte, escaped
    } else if (n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0) {
      append_hex(out, c);  // U+0080 to U+009F: C1 controls (0x9b starts a terminal escape)
      append_hex(out, static_cast<unsigned char>(s[i + 1]));
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n - 1;
    }
    ++i;
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace

std::string printable(std::string_view s, size_t max_chars) { return escaped(s, max_chars, true); }

std::string one_line(std::string_view message, size_t max_chars) { return escaped(message, max_chars, false); }

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) < 0x80) continue;
    const size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n - 1;
  }
  return true;
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates, size_t max_distance) {
  std::string best;
  size_t best_distance = max_distance + 1;
  for (const std::string& c : candidates) {
    const size_t apart = word.size() > c.size() ? word.size() - c.size() : c.size() - word.size();
    if (apart > max_distance) continue;  // at least that many edits: a huge word costs nothing
    const size_t d = edit_distance(word, c);
    if (d >= 1 && d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string counted(uint64_t n, std::string_view one, std::string_view many) {
  std::string out = std::to_string(n) + " ";
  if (n == 1) return out.append(one);
  return many.empty() ? out.append(one).append("s") : out.append(many);
}

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (&item != &items.front()) out.append(separator);
    out += item;
  }
  return out;
}

std::vector<std::string> split_trimmed(std::string_view s, char separator) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(s.find(separator, start), s.size());
    std::string_view piece = s.substr(start, end - start);
    while (!piece.empty() && (piece.front() == ' ' || piece.front() == '\t')) piece.remove_prefix(1);
    while (!piece.empty() && (piece.back() == ' ' || piece.back() == '\t')) piece.remove_suffix(1);
    out.emplace_back(piece);
    if (end == s.size()) return out;
    start = end + 1;
  }
}

}  // namespace tandem
