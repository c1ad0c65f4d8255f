#include "tandem/data/sources/idx.h"

#include <zlib.h>

#include <cstdio>
#include <filesystem>

#include "tandem/common/error.h"

namespace tandem::data {
namespace {

// The whole file, inflated when gzip-compressed (zlib reads plain files as they are).
std::vector<uint8_t> read_maybe_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw ConfigError("cannot open " + path + ": check the path and its permissions");
  gzbuffer(f, 1 << 17);
  std::vector<uint8_t> out;
  for (;;) {
    const size_t done = out.size();
    out.resize(done + (1 << 20));
    const int n = gzread(f, out.data() + done, 1 << 20);
    out.resize(done + static_cast<size_t>(std::max(n, 0)));
    int code = Z_OK;
    const char* message = gzerror(f, &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
      const std::string what = code == Z_BUF_ERROR ? "the gzip stream ends early (truncated)" : message;
      gzclose(f);
      throw ConfigError(path + " is not a readable idx file: " + what + ": replace the file");
    }
    if (n == 0) break;
  }
  gzclose(f);
  return out;
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

IdxArray read_idx(const std::string& path, int dims) {
  IdxArray a;
  std::error_code ec;
  a.file_bytes = std::filesystem::file_size(path, ec);
  if (ec) throw ConfigError("cannot read " + path + ": " + ec.message());
  std::vector<uint8_t> bytes = read_maybe_gzip(path);
  const std::string kind = dims == 1 ? "labels (idx1)" : "images (idx" + std::to_string(dims) + ")";
  const uint32_t expected = 0x00000800u | static_cast<uint32_t>(dims);
  if (bytes.size() < 4 || big_endian(bytes.data()) != expected) {
    const std::string got = bytes.size() < 4 ? "no magic number" : "magic number " + hex32(big_endian(bytes.data()));
    throw ConfigError(path + " has " + got + ", not " + hex32(expected) + " (unsigned-byte " + kind +
                      "): is it the right file?");
  }
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header) throw ConfigError(path + " is truncated: it ends inside its header");
  uint64_t count = 1;
  std::string shape;
  for (int d = 0; d < dims; ++d) {
    a.dims.push_back(big_endian(bytes.data() + 4 + 4 * d));
    count *= a.dims.back();
    shape += (d ? " x " : "") + std::to_string(a.dims.back());
  }
  const uint64_t payload = bytes.size() - header;
  if (payload < count) {
    throw ConfigError(path + " is truncated: its header promises " + shape + " = " + std::to_string(count) +
                      " bytes of values, but only " + std::to_string(payload) + " follow: replace the file");
  }
  if (payload > count) {
    throw ConfigError(path + " has " + std::to_string(payload - count) + " bytes after the " + shape +
                      " values its header promises: is it the right file?");
  }
  a.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return a;
}

}  // namespace tandem::data
