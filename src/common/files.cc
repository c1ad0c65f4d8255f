#include "tandem/common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tandem {

namespace {

// Why a write into `dir` failed, as what it is and what to do: a full disk with its free
// space, a read-only file system, a permission, a missing folder.
std::string write_problem(const std::string& what, const std::filesystem::path& dir, int err) {
  const std::string where = dir.empty() ? std::string(".") : dir.string();
  switch (err) {
    case ENOSPC:
    case EDQUOT: {
      std::error_code ec;
      const auto space = std::filesystem::space(where, ec);
      const std::string free = ec ? std::string("unknown") : std::to_string(space.available >> 10) + " KiB";
      return what + ": the disk is full (" + free + " free in " + where +
             "): free some space, or point the output at a larger volume";
    }
    case EROFS:
      return what + ": " + where + " is on a read-only file system: point the output at a writable volume";
    case EACCES:
    case EPERM:
      return what + ": permission denied: make " + where + " writable for this user";
    case ENOENT:
    case ENOTDIR:
      return what + ": " + where + " does not exist and cannot be made";
    default:
      return what + ": " + std::strerror(err);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw std::runtime_error(write_problem("cannot make the folder of " + path, dir, ec.value()));
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::string problem;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    problem = write_problem("cannot write " + tmp, dir, errno);
  } else {
    for (size_t done = 0; done < text.size() && problem.empty();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) problem = write_problem("cannot write " + tmp, dir, n < 0 ? errno : ENOSPC);
      else done += static_cast<size_t>(n);
    }
    if (::close(fd) != 0 && problem.empty()) problem = write_problem("cannot write " + tmp, dir, errno);
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

std::string unwritable_reason(const std::string& dir) {
  const std::string probe = dir + "/.tandem-write-check-" + std::to_string(::getpid());
  try {
    write_file_atomically(probe, "tandem checks that it can write here\n");
  } catch (const std::exception& e) {
    return e.what();
  }
  std::error_code ec;
  std::filesystem::remove(probe, ec);
  return "";
}

bool hold_reserve(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  ::close(fd);
  if (err == 0) return true;
  ::unlink(path.c_str());
  return false;
}

void release_reserve(const std::string& path) { ::unlink(path.c_str()); }

}  // namespace tandem
