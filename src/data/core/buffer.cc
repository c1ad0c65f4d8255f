#include "tandem/data/core/buffer.h"

#include <atomic>

namespace tandem::data {
namespace {

std::atomic<BufferAllocateFn> g_allocate{nullptr};

}  // namespace

BufferBlock heap_block(size_t size) {
  std::byte* p = new std::byte[size];
  return {p, p, [](void* c) { delete[] static_cast<std::byte*>(c); }};
}

void set_buffer_allocator(BufferAllocateFn allocate) { g_allocate.store(allocate); }

Buffer::Buffer(size_t size) : size_(size) {
  const BufferAllocateFn allocate = g_allocate.load(std::memory_order_relaxed);
  block_ = allocate ? allocate(size) : heap_block(size);
}

}  // namespace tandem::data
