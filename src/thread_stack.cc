// A floor under the stack size libraries ask for their threads: civetweb (the metrics
// server) is built with a 100 KiB stack (USE_STACK_SIZE), and glibc refuses a stack that
// cannot hold the process's static TLS (EINVAL) -- with LibTorch's CUDA libraries loaded
// that TLS is over 140 KiB (libcublasLt alone 100 KiB), so every thread civetweb started
// failed and --metrics-port could not serve in the CUDA build. Defined in the executable,
// it comes before libc's in the dynamic linker's search, so libraries' calls reach it.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>

namespace {

constexpr size_t kLeastThreadStack = size_t{1} << 20;  // 1 MiB: room for the TLS, and the thread's frames

using SetStackSize = int (*)(pthread_attr_t*, size_t);

}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  static const auto libc = reinterpret_cast<SetStackSize>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return libc ? libc(attr, std::max(size, kLeastThreadStack)) : 22;  // EINVAL: libc's would not be found
}
