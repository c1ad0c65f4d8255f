#include "tandem/common/environment.h"
#include "tandem/common/memory_reuse.h"

#include <malloc.h>

#include <cstdlib>
#include <string_view>

namespace tandem {

void keep_freed_memory() {
#if defined(__GLIBC__)
  const std::string tunables = process_env("GLIBC_TUNABLES").value_or("");
  const bool user_set = process_env("MALLOC_MMAP_THRESHOLD_") || process_env("MALLOC_TRIM_THRESHOLD_") ||
                        tunables.find("glibc.malloc.") != std::string::npos;
  if (user_set) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's ceiling for it on 64-bit (HEAP_MAX_SIZE / 2)
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace tandem
