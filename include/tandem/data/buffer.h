// An owned, uninitialised byte buffer for batch payloads. Unlike std::string or
// std::vector it does not zero its memory first (a wasted pass over megabytes), and it
// can hand its memory to gRPC for zero-copy sends (release()).
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>

namespace tandem::data {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t size) : bytes_(new std::byte[size]), size_(size) {}

  std::byte* data() { return bytes_.get(); }
  const std::byte* data() const { return bytes_.get(); }
  size_t size() const { return size_; }

  // Gives up ownership; free the result with delete[].
  std::byte* release() {
    size_ = 0;
    return bytes_.release();
  }

  // Byte equality, for tests and checks.
  bool operator==(const Buffer& other) const {
    return size_ == other.size_ && (size_ == 0 || std::memcmp(data(), other.data(), size_) == 0);
  }

 private:
  std::unique_ptr<std::byte[]> bytes_;
  size_t size_ = 0;
};

}  // namespace tandem::data
