#include "tandem/common/files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tandem {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::string problem;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) problem = "cannot write " + tmp + ": check the directory exists and is writable";
  }
  std::error_code ec;
  if (problem.empty()) {
    std::filesystem::rename(tmp, target, ec);
    if (ec) problem = "cannot replace " + path + " (" + ec.message() + ")";
  }
  if (problem.empty()) return;
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);
  throw std::runtime_error(problem);
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(text).str();
}

}  // namespace tandem
