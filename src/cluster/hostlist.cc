// Slurm's compressed host lists (node[01-04,07]) expanded.
#include "tandem/cluster/slurm.h"

#include <algorithm>
#include <charconv>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::cluster {
namespace {

constexpr size_t kMaxHosts = 100000;

struct Parse {
  const std::string& list;
  const std::string& origin;

  [[noreturn]] void bad(const std::string& problem) const {
    throw ConfigError(origin + " is not a Slurm host list (" + problem + "): \"" + printable(list, 120) +
                      "\"; write it as Slurm does, e.g. node[01-04,07],gpu1");
  }

  long number(const std::string& text) const {
    long v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
      bad(std::string(1, '"').append(printable(text, 40)).append("\" is not a number"));
    }
    return v;
  }

  // "01-04,07" -> 01 02 03 04 07
  std::vector<std::string> ranges(const std::string& inside) const {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= inside.size()) {
      const size_t comma = std::min(inside.find(',', start), inside.size());
      const std::string part = inside.substr(start, comma - start);
      const size_t dash = part.find('-');
      const std::string lo = part.substr(0, dash);
      const long first = number(lo);
      const long last = dash == std::string::npos ? first : number(part.substr(dash + 1));
      if (last < first) bad("the range " + part + " runs backwards");
      if (static_cast<size_t>(last - first) >= kMaxHosts) bad("the range " + part + " is too long");
      for (long v = first; v <= last; ++v) {
        std::string digits = std::to_string(v);
        if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
        out.push_back(std::move(digits));
      }
      start = comma + 1;
    }
    return out;
  }

  // One name, brackets and all: "r[1-2]n[01-02]".
  void expand(const std::string& name, std::vector<std::string>& out) const {
    const size_t open = name.find('[');
    if (open == std::string::npos) {
      if (name.find(']') != std::string::npos) bad("\"]\" without \"[\"");
      out.push_back(name);
      return;
    }
    const size_t close = name.find(']', open);
    if (close == std::string::npos) bad("\"[\" without \"]\"");
    const std::string prefix = name.substr(0, open);
    if (prefix.find(']') != std::string::npos) bad("\"]\" without \"[\"");
    std::vector<std::string> rest;
    expand(name.substr(close + 1), rest);
    for (const std::string& value : ranges(name.substr(open + 1, close - open - 1))) {
      for (const std::string& tail : rest) {
        if (out.size() >= kMaxHosts) bad("more than 100,000 hosts");
        out.push_back(prefix + value + tail);
      }
    }
  }
};

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& list, const std::string& origin) {
  const Parse p{list, origin};
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) p.bad("\"]\" without \"[\"");
    if (c != ',' || depth > 0) continue;
    const std::string name = list.substr(start, i - start);
    if (name.empty()) p.bad("an empty name");
    p.expand(name, out);
    start = i + 1;
  }
  if (depth != 0) p.bad("\"[\" without \"]\"");
  return out;
}

}  // namespace tandem::cluster
