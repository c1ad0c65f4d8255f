// The checks flags share: numbers in range, whole numbers, plain text of bounded size.
#include "tandem/cli/options.h"
#include "flag_checks.h"

#include "tandem/transport/credentials.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "tandem/common/error.h"
#include "tandem/common/json_limits.h"
#include "tandem/common/python_literal.h"
#include "tandem/common/text.h"


namespace tandem::cli {
namespace {

// Free text settings (paths, names, specs) are at most this long and plain UTF-8
// without control characters (a JSON --pipeline may span lines), so that every message
// that quotes one stays short and one line.
constexpr size_t kMaxTextBytes = 16384;

// Numbers as a person writes them: 1, 0.5, 65535, 1e+09.
std::string plain(double v) { return fmt::format("{:.15g}", v); }

// A finite number in [lo, hi] (strictly above lo when `open_low`). CLI11's own ranges let
// NaN through and print their bounds as 0.000000 to 1.79e308. The upper bounds keep
// seconds and counts inside what tandem's clocks and integers hold.
CLI::Validator number_in(double lo, double hi, bool open_low) {
  const std::string desc = (open_low ? "(" : "[") + plain(lo) + " - " + plain(hi) + "]";
  return CLI::Validator(
      [lo, hi, open_low](std::string& text) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "'" + printable(text, 40) + "' is not a number";
        if (!std::isfinite(v)) return "'" + printable(text, 40) + "' is not a finite number";
        if (v < lo || v > hi || (open_low && v == lo)) {
          return printable(text, 40) + " is out of range: use " + (open_low ? "more than " : "") + plain(lo) +
                 (open_low ? " and at most " : " to ") + plain(hi);
        }
        return "";
      },
      desc);
}

constexpr double kMaxNumber = 1e9;

}  // namespace

// A whole number in [lo, hi] written in decimal. CLI11 reads unsigned options with
// strtoull, which takes "-5" as 18446744073709551611, a number past the type's end as its
// largest value, and "010" as octal; this refuses the first two with the range and
// rewrites the text to the plain decimal the conversion then reads.
CLI::Validator whole_number(uint64_t lo, uint64_t hi) {
  const std::string desc = "[" + std::to_string(lo) + " - " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const std::string range = "use " + std::to_string(lo) + " to " + std::to_string(hi);
        const std::string_view digits = std::string_view(text).substr(text.rfind('+', 0) == 0 ? 1 : 0);
        const bool negative = !text.empty() && text[0] == '-';
        const std::string_view magnitude = negative ? std::string_view(text).substr(1) : digits;
        if (magnitude.empty() || magnitude.find_first_not_of("0123456789") != std::string_view::npos) {
          return "'" + printable(text, 40) + "' is not a whole number: " + range;
        }
        const bool zero = magnitude.find_first_not_of('0') == std::string_view::npos;
        if (negative && !zero) return printable(text, 40) + " is out of range: " + range;
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(magnitude.data(), magnitude.data() + magnitude.size(), v);
        if (ec != std::errc() || end != magnitude.data() + magnitude.size() || v < lo || v > hi) {
          return printable(text, 40) + " is out of range: " + range;
        }
        text = std::to_string(v);
        return "";
      },
      desc);
}


CLI::Validator plain_text() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.size() > kMaxTextBytes) {
          return "'" + printable(text, 40) + "' is longer than " + std::to_string(kMaxTextBytes) + " bytes";
        }
        const bool control = std::any_of(text.begin(), text.end(), [](char ch) {
          const auto c = static_cast<unsigned char>(ch);
          return (c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f;
        });
        if (control || !valid_utf8(text)) {
          return "'" + printable(text, 40) + "' holds a control character or a byte that is not UTF-8";
        }
        return "";
      },
      "");
}

// Every text option added to `app` after the first `before` takes only plain_text().
void limit_text(CLI::App& app, size_t before) {
  const std::vector<CLI::Option*> all = app.get_options([](const CLI::Option*) { return true; });
  for (size_t i = before; i < all.size(); ++i) {
    if (all[i]->get_type_name().rfind("TEXT", 0) == 0) all[i]->check(plain_text());
  }
}

CLI::Validator positive() { return number_in(0, kMaxNumber, true); }
CLI::Validator non_negative() { return number_in(0, kMaxNumber, false); }
CLI::Validator in_range(double lo, double hi) { return number_in(lo, hi, false); }

}  // namespace tandem::cli
