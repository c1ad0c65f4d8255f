// What spdlog writes while a CapturedLog lives: for tests of what tandem says.
#pragma once

#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace tandem::testing {

// What spdlog writes while it lives.
struct CapturedLog {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> before = spdlog::default_logger();
  CapturedLog() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(before); }
  size_t count(const std::string& text) const {
    const std::string s = out.str();
    size_t n = 0;
    for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + 1)) ++n;
    return n;
  }
};

}  // namespace tandem::testing
