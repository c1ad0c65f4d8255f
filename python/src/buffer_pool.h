// Batch memory a Python process can page-lock once: blocks kept for reuse, by size, and
// never given back while the process lives, so the same addresses recur batch after batch
// and memory registered with CUDA (cudaHostRegister, through the user's torch) stays
// valid; and no batch pays page faults on fresh memory. The module's allocator
// (data::set_buffer_allocator) from tandem_init on.
#pragma once

#include <cstddef>
#include <string>

namespace tandem::python {

// Makes every later batch buffer of this process come from the pool (on) or the heap.
void use_buffer_pool(bool on);

// {"blocks": made, "bytes": their total, "free": waiting for reuse} as JSON.
std::string buffer_pool_stats();

}  // namespace tandem::python
