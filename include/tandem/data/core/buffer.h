// An owned, uninitialised byte buffer for batch payloads. Unlike std::string or
// std::vector it does not zero its memory first (a wasted pass over megabytes), and it
// can hand its memory to gRPC for zero-copy sends (release()).
//
// Where the memory comes from is a process-wide hook: a CUDA trainer installs pinned
// (page-locked) host memory, so a received batch (copied once out of gRPC's buffers)
// goes to the GPU by asynchronous DMA, without Torch in this library.
#pragma once

#include <cstddef>
#include <cstring>
#include <utility>

namespace tandem::data {

// A block of memory and how to give it back: free(context) releases it.
struct BufferBlock {
  std::byte* data = nullptr;
  void* context = nullptr;
  void (*free)(void* context) = nullptr;
};

// Returns a block of at least `size` bytes, or throws std::bad_alloc.
using BufferAllocateFn = BufferBlock (*)(size_t size);

// Installs the allocator every later Buffer uses; nullptr restores the heap (new[]).
// Set it once at start, before threads make buffers; blocks already made keep their own
// free function, so switching is safe for them.
void set_buffer_allocator(BufferAllocateFn allocate);

// The heap allocator (new[] / delete[]).
BufferBlock heap_block(size_t size);

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t size);
  ~Buffer() { reset(); }
  Buffer(Buffer&& other) noexcept : block_(std::exchange(other.block_, {})), size_(std::exchange(other.size_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      reset();
      block_ = std::exchange(other.block_, {});
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::byte* data() { return block_.data; }
  const std::byte* data() const { return block_.data; }
  size_t size() const { return size_; }

  // Gives up ownership: the caller frees the block with block.free(block.context).
  BufferBlock release() {
    size_ = 0;
    return std::exchange(block_, {});
  }

  // Byte equality, for tests and checks.
  bool operator==(const Buffer& other) const {
    return size_ == other.size_ && (size_ == 0 || std::memcmp(data(), other.data(), size_) == 0);
  }

 private:
  void reset() {
    if (block_.free) block_.free(block_.context);
    block_ = {};
    size_ = 0;
  }
  BufferBlock block_;
  size_t size_ = 0;
};

}  // namespace tandem::data
