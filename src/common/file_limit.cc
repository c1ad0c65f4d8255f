#include "tandem/common/file_limit.h"

#include <sys/resource.h>

namespace tandem {

void raise_file_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);  // best effort: the soft limit stays as it was if refused
}

}  // namespace tandem
