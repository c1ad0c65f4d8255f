#include "tandem/common/python_literal.h"

#include <cctype>
#include <cstdlib>
#include <string>

#include "tandem/common/json_limits.h"

namespace tandem {
namespace {

// A recursive-descent reader over `s`; every method returns false on anything str() of
// JSON-like data does not write, leaving the caller to report the value as it came.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  bool whole(nlohmann::json& out) {
    if (!value(out, 0)) return false;
    space();
    return at_ == s_.size();
  }

 private:
  void space() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }
  bool eat(char c) {
    space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (s_.substr(at_, w.size()) != w) return false;
    const size_t end = at_ + w.size();
    if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) return false;
    at_ = end;
    return true;
  }

  bool value(nlohmann::json& out, int depth) {
    if (static_cast<size_t>(depth) > kMaxJsonDepth) return false;
    space();
    if (at_ >= s_.size()) return false;
    const char c = s_[at_];
    if (c == '[') return sequence(out, ']', depth);
    if (c == '(') return sequence(out, ')', depth);
    if (c == '{') return dict(out, depth);
    if (c == '\'' || c == '"') {
      std::string text;
      if (!string(text)) return false;
      out = std::move(text);
      return true;
    }
    if (word("True")) return (out = true), true;
    if (word("False")) return (out = false), true;
    if (word("None")) return (out = nullptr), true;
    return number(out);
  }

  bool sequence(nlohmann::json& out, char close, int depth) {
    ++at_;
    out = nlohmann::json::array();
    if (eat(close)) return true;
    while (true) {
      nlohmann::json item;
      if (!value(item, depth + 1)) return false;
      out.push_back(std::move(item));
      if (eat(close)) return true;
      if (!eat(',')) return false;
      if (eat(close)) return true;  // a trailing comma: (1,) or [1, 2,]
    }
  }

  bool dict(nlohmann::json& out, int depth) {
    ++at_;
    out = nlohmann::json::object();
    if (eat('}')) return true;
    while (true) {
      nlohmann::json key;
      if (!value(key, depth + 1) || key.is_array() || key.is_object() || key.is_null()) return false;
      if (!eat(':')) return false;
      nlohmann::json item;
      if (!value(item, depth + 1)) return false;
      out[key.is_string() ? key.get<std::string>() : key.dump()] = std::move(item);
      if (eat('}')) return true;
      if (!eat(',')) return false;
      if (eat('}')) return true;
    }
  }

  bool string(std::string& out) {
    const char quote = s_[at_++];
    while (at_ < s_.size()) {
      const char c = s_[at_++];
      if (c == quote) return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) return false;
      const char e = s_[at_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case '\\': case '\'': case '"': out += e; break;
        case 'x': case 'u': case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (at_ + digits > s_.size()) return false;
          const std::string hex(s_.substr(at_, digits));
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + digits || cp > 0x10FFFF) return false;
          at_ += digits;
          utf8(static_cast<uint32_t>(cp), out);
          break;
        }
        default: out += '\\'; out += e;  // Python keeps unknown escapes as written
      }
    }
    return false;  // no closing quote
  }

  static void utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool number(nlohmann::json& out) {
    const size_t start = at_;
    if (at_ < s_.size() && (s_[at_] == '-' || s_[at_] == '+')) ++at_;
    bool digits = false, fraction = false;
    while (at_ < s_.size()) {
      const char c = s_[at_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        digits = true;
      } else if (c == '.' || c == 'e' || c == 'E' || ((c == '-' || c == '+') && (s_[at_ - 1] == 'e' || s_[at_ - 1] == 'E'))) {
        fraction = true;
      } else {
        break;
      }
      ++at_;
    }
    if (!digits) return false;
    const std::string text(s_.substr(start, at_ - start));
    char* end = nullptr;
    if (fraction) {
      const double d = std::strtod(text.c_str(), &end);
      out = d;
    } else {
      const long long i = std::strtoll(text.c_str(), &end, 10);
      out = i;
    }
    return end == text.c_str() + text.size();
  }

  std::string_view s_;
  size_t at_ = 0;
};

}  // namespace

std::optional<nlohmann::json> parse_python_literal(std::string_view text) {
  nlohmann::json out;
  if (!Reader(text).whole(out)) return std::nullopt;
  return out;
}

}  // namespace tandem
