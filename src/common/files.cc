#include "tandem/common/files.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace tandem {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp + ": check the directory exists and is writable");
  }
  std::filesystem::rename(tmp, target);
}

}  // namespace tandem
