#include "buffer_pool.h"

#include <sys/mman.h>

#include <map>
#include <mutex>
#include <new>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/data/core/buffer.h"

namespace tandem::python {
namespace {

struct Pool {
  std::mutex mu;
  std::map<size_t, std::vector<std::byte*>> free;  // by size
  std::map<std::byte*, size_t> sizes;              // every block made
  size_t bytes = 0, waiting = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // outlives every buffer, however late it is freed
  return *p;
}

size_t page_rounded(size_t size) {
  constexpr size_t kPage = 4096;
  return (std::max<size_t>(size, 1) + kPage - 1) / kPage * kPage;
}

void give_back(void* context) {
  auto* data = static_cast<std::byte*>(context);
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  p.free[p.sizes.at(data)].push_back(data);
  ++p.waiting;
}

data::BufferBlock pooled_block(size_t size) {
  const size_t rounded = page_rounded(size);
  Pool& p = pool();
  {
    std::lock_guard lock(p.mu);
    auto it = p.free.find(rounded);
    if (it != p.free.end() && !it->second.empty()) {
      std::byte* data = it->second.back();
      it->second.pop_back();
      --p.waiting;
      return {data, data, &give_back};
    }
  }
  void* m = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  auto* data = static_cast<std::byte*>(m);
  std::lock_guard lock(p.mu);
  p.sizes[data] = rounded;
  p.bytes += rounded;
  return {data, data, &give_back};
}

}  // namespace

void use_buffer_pool(bool on) { data::set_buffer_allocator(on ? &pooled_block : nullptr); }

std::string buffer_pool_stats() {
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  return nlohmann::json({{"blocks", p.sizes.size()}, {"bytes", p.bytes}, {"free", p.waiting}}).dump();
}

}  // namespace tandem::python
