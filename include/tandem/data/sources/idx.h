// The idx file format of MNIST: a big-endian header (magic 0x0000TTNN: type TT, NN
// dimensions, then NN 32-bit sizes) and the values, row-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> values;  // unsigned bytes (type 0x08)
  uint64_t file_bytes = 0;      // size of the file on disk (compressed, if it is)
};

// Reads `path` (gzip-compressed or plain) and checks it holds unsigned bytes in `dims`
// dimensions: the magic number, then exactly as many values as the header promises.
// Throws ConfigError naming the path and the problem (missing, wrong magic, truncated,
// trailing bytes, corrupt gzip).
IdxArray read_idx(const std::string& path, int dims);

}  // namespace tandem::data
