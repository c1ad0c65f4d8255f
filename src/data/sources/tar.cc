#include "tandem/data/sources/tar.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <cstring>
#include <optional>

namespace tandem::data {
namespace {

constexpr uint64_t kBlock = kTarHeaderBytes;
constexpr size_t kWindow = kMaxKeptMemberBytes;

// Reads the file through one 64 KiB window: the headers of small members share a read.
class Window {
 public:
  Window(int fd, uint64_t size, double latency_ms) : fd_(fd), size_(size), latency_ms_(latency_ms), buf_(kWindow) {}

  // Bytes [offset, offset + n) (n <= kWindow, within the file), or null with `problem` set.
  const char* at(uint64_t offset, size_t n, std::string& problem) {
    if (offset >= start_ && offset + n <= start_ + have_) return buf_.data() + (offset - start_);
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kWindow, size_ - offset));
    if (latency_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(latency_ms_));
    size_t got = 0;
    while (got < want) {
      const ssize_t r = ::pread(fd_, buf_.data() + got, want - got, static_cast<off_t>(offset + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        problem = r == 0 ? "ends early while its headers are read" : std::string("read failed: ") + std::strerror(errno);
        have_ = 0;
        return nullptr;
      }
      got += static_cast<size_t>(r);
    }
    start_ = offset;
    have_ = got;
    return buf_.data();
  }

 private:
  int fd_;
  uint64_t size_;
  double latency_ms_;
  std::vector<char> buf_;
  uint64_t start_ = 0;
  size_t have_ = 0;
};

// A header's numeric field: octal text, or GNU's base-256 (high bit of the first byte set).
std::optional<uint64_t> number(const char* field, size_t len) {
  const auto* u = reinterpret_cast<const unsigned char*>(field);
  uint64_t v = 0;
  if (u[0] & 0x80) {
    for (size_t i = 1; i < len; ++i) {
      if (v >> 56) return std::nullopt;
      v = (v << 8) | u[i];
    }
    return (u[0] & 0x7f) ? std::nullopt : std::optional<uint64_t>(v);
  }
  size_t i = 0;
  while (i < len && (field[i] == ' ' || field[i] == '\0')) ++i;
  for (; i < len && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v >> 60) return std::nullopt;
    v = v * 8 + static_cast<uint64_t>(field[i] - '0');
  }
  for (; i < len; ++i) {
    if (field[i] != ' ' && field[i] != '\0') return std::nullopt;
  }
  return v;
}

bool checksum_ok(const char* h) {
  const std::optional<uint64_t> stored = number(h + 148, 8);
  if (!stored) return false;
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
  }
  return sum == *stored;
}

std::string field(const char* f, size_t len) { return std::string(f, strnlen(f, len)); }

// The header's own name: ustar's prefix + "/" + name.
std::string header_name(const char* h) {
  const std::string name = field(h, 100);
  if (std::memcmp(h + 257, "ustar\0", 6) != 0) return name;  // v7 or GNU: no prefix field
  const std::string prefix = field(h + 345, 155);
  return prefix.empty() ? name : prefix + "/" + name;
}

// pax records "LEN key=value\n": the path and size, where given.
void read_pax(const std::string& data, std::optional<std::string>& path, std::optional<uint64_t>& size) {
  size_t at = 0;
  while (at < data.size()) {
    const size_t space = data.find(' ', at);
    if (space == std::string::npos) return;
    const uint64_t len = std::strtoull(data.c_str() + at, nullptr, 10);
    if (len == 0 || at + len > data.size()) return;
    const std::string record = data.substr(space + 1, at + len - space - 2);  // without "\n"
    const size_t eq = record.find('=');
    if (eq != std::string::npos) {
      const std::string key = record.substr(0, eq), value = record.substr(eq + 1);
      if (key == "path") path = value;
      if (key == "size") size = std::strtoull(value.c_str(), nullptr, 10);
    }
    at += static_cast<size_t>(len);
  }
}

}  // namespace

namespace {

struct Walk {
  Window& window;
  uint64_t size;
  const std::function<bool(const std::string&)>& keep;
  TarListing out;
  std::optional<std::string> long_name;  // from a GNU 'L' entry or a pax header, for the next member
  std::optional<uint64_t> long_size;

  // The bytes of a small extension entry or kept member, or nullopt (problem set).
  std::optional<std::string> data_of(uint64_t offset, uint64_t bytes) {
    if (bytes > kWindow) return std::string();  // not kept: larger than a label can be
    const char* p = window.at(offset, static_cast<size_t>(bytes), out.problem);
    if (!p) return std::nullopt;
    return std::string(p, static_cast<size_t>(bytes));
  }

  // One header at `pos`: returns where the next one is, or nullopt at the end or a problem.
  std::optional<uint64_t> step(uint64_t pos);
};

std::optional<uint64_t> Walk::step(uint64_t pos) {
  if (pos + kBlock > size) {
    if (pos < size) out.problem = "ends inside a header at byte " + std::to_string(pos) + " (a truncated file)";
    return std::nullopt;
  }
  const char* h = window.at(pos, kBlock, out.problem);
  if (!h) return std::nullopt;
  if (std::all_of(h, h + kBlock, [](char c) { return c == 0; })) return std::nullopt;  // the end marker
  if (!checksum_ok(h)) {
    out.problem = pos == 0 ? "not a tar file (its first 512 bytes are no tar header): give .tar shards, not "
                             "compressed ones (.tar.gz) or other files"
                           : "a corrupt tar header at byte " + std::to_string(pos);
    return std::nullopt;
  }
  const char type = h[156];
  const bool extension = type == 'L' || type == 'K' || type == 'x' || type == 'g';
  const std::optional<uint64_t> bytes = long_size && !extension ? long_size : number(h + 124, 12);
  const std::string name = long_name && !extension ? *long_name : header_name(h);
  if (!bytes) {
    out.problem = "a header with an unreadable size at byte " + std::to_string(pos);
    return std::nullopt;
  }
  const uint64_t data = pos + kBlock;
  if (*bytes > size || data + *bytes > size) {
    out.problem = "member " + name + " (" + std::to_string(*bytes) + " bytes at offset " + std::to_string(data) +
                  ") runs past the end of the file (" + std::to_string(size) + " bytes): the shard is truncated";
    return std::nullopt;
  }
  if (!extension) long_name.reset(), long_size.reset();
  if (type == 'L' || type == 'x') {
    const std::optional<std::string> text = data_of(data, *bytes);
    if (!text) return std::nullopt;
    if (type == 'L') long_name = std::string(text->c_str());
    else read_pax(*text, long_name, long_size);
  } else if (type == '0' || type == '\0' || type == '7') {
    TarMember m{name, data, *bytes, {}};
    if (keep(name)) {
      std::optional<std::string> kept = data_of(data, *bytes);
      if (!kept) return std::nullopt;
      m.data = std::move(*kept);
    }
    out.members.push_back(std::move(m));
  } else if (type == '1' || type == '2') {
    out.members.push_back(TarMember{name, data, 0, {}, true});
  }  // directories, devices, GNU long link names, pax global headers: not members
  return data + (*bytes + kBlock - 1) / kBlock * kBlock;
}

}  // namespace

bool is_member_header(const char* header, uint64_t bytes) {
  const char type = header[156];
  return checksum_ok(header) && (type == '0' || type == '\0' || type == '7') && number(header + 124, 12) == bytes;
}

TarListing list_tar(const std::string& path, const std::function<bool(const std::string&)>& keep,
                    double read_latency_ms) {
  TarListing listing;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    listing.problem = std::string("cannot open: ") + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return listing;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  Window window(fd, size, read_latency_ms);
  Walk walk{window, size, keep, {}, {}, {}};
  if (size < kBlock) {
    walk.out.problem = "not a tar file (" + std::to_string(size) + " bytes, less than one tar header)";
  }
  for (std::optional<uint64_t> pos = size < kBlock ? std::nullopt : std::optional<uint64_t>(0); pos;) {
    pos = walk.step(*pos);
  }
  ::close(fd);
  return std::move(walk.out);
}

}  // namespace tandem::data
