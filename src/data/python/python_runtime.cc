// Which Python runs users' code, and where tandem's half of the pool's protocol is
// (process_pool.h: python_interpreter, python_runtime_options, find_dataset_worker).
#include <cstdlib>
#include <filesystem>

#include "tandem/common/environment.h"
#include "tandem/common/thread_pool.h"
#include "tandem/data/python/process_pool.h"

namespace tandem::data {
namespace fs = std::filesystem;

std::string python_interpreter(const std::string& python) {
  std::error_code ec;
  if (!python.empty()) return python;
  if (const std::string env = process_env("TANDEM_PYTHON").value_or(""); !env.empty()) return env;
  return fs::exists("/usr/bin/python3", ec) ? "/usr/bin/python3" : "python3";
}

PythonPoolOptions python_runtime_options(const PythonRuntime& runtime) {
  PythonPoolOptions p;
  p.python = python_interpreter(runtime.python);
  p.procs = runtime.procs > 0 ? runtime.procs : available_cores();
  p.sample_timeout_s = runtime.sample_timeout_s;
  p.script = find_dataset_worker();
  p.start_procs = runtime.start_procs;
  if (runtime.shm_bytes > 0) {
    p.max_shm_bytes = std::max<size_t>(runtime.shm_bytes / p.procs, 1);
    p.shm_limit_setting = "half of --max-inflight-mb, shared by the " + std::to_string(p.procs) + " --python-procs";
  }
  return p;
}

std::string find_dataset_worker() {
  if (const std::string env = process_env("TANDEM_DATASET_WORKER").value_or(""); !env.empty()) {
    if (!fs::is_regular_file(env)) {
      throw ConfigError("TANDEM_DATASET_WORKER=" + env + " is not a file: point it at _dataset_worker.py");
    }
    return env;
  }
  std::error_code ec;
  const fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  std::vector<fs::path> places = {dir / "python/tandem", dir / "../python/tandem", dir / "../share/tandem/python/tandem"};
  std::string looked;
  for (const fs::path& place : places) {
    const fs::path candidate = (place / "_dataset_worker.py").lexically_normal();
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  throw ConfigError("cannot find tandem's _dataset_worker.py (looked at " + looked +
                    "): build the target tandem_python_files, install tandem, or set TANDEM_DATASET_WORKER");
}

}  // namespace tandem::data
