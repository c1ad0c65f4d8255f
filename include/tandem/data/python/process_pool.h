// A pool of Python processes that run a user's dataset (--data python:FILE:NAME): each
// imports FILE once, builds NAME(**args), then makes one sample per request. Arrays come
// back through shared memory (a memfd per process), never pickled. The protocol is
// python/tandem/_dataset_worker.py's; it already carries named fields of any dtype and
// shape, so that only the consumer (python_dataset.cc) decides which it accepts.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tandem/common/error.h"

namespace tandem::data {

struct PythonPoolOptions {
  std::string python = "/usr/bin/python3";  // the interpreter (a path, or a name looked up on PATH)
  std::string script;                       // python/tandem/_dataset_worker.py (find_dataset_worker())
  std::string file;                         // the user's file, absolute
  std::string name;                         // the class or function in it that makes the dataset
  std::string args_json = "{}";             // its keyword arguments: a JSON object
  int procs = 1;                            // processes, >= 1
  double sample_timeout_s = 60;             // one sample longer than this kills its process
  double start_timeout_s = 300;             // importing FILE and building the dataset, per process
  size_t initial_shm_bytes = size_t{1} << 20;  // each process's shared memory at start; grows on demand
  // What NAME is: a dataset (NAME(**args) with __len__ and __getitem__), or a function
  // of one array, the python(FILE:FUNCTION) step of --pipeline (call()).
  enum class Kind { kDataset, kFunction } kind = Kind::kDataset;
  // The most shared memory each process may map (0: 4 GiB); a sample that needs more is a
  // PythonSampleError naming `shm_limit_setting`, the setting that gives the room.
  size_t max_shm_bytes = 0;
  std::string shm_limit_setting = "--max-inflight-mb";
  // Processes started at once (0: all); the others start when a call first finds every
  // started one busy (a trainer's local threads use as many as they run at once).
  int start_procs = 0;
  // Ask the first process whether tandem can make the dataset natively (a torchvision
  // image folder: python/tandem/_torchvision_native.py): PythonDatasetAbout::native.
  bool describe_native = false;
  // A Kind::kFunction pool of a torchvision dataset's python() step: {"args", "from", "to",
  // "domain"} (StepSpec::transforms): the function is that part of NAME(**args)'s transform.
  std::string transforms_json;
};

// How users' Python runs (a python:FILE:NAME dataset, a python() step), from the settings
// (source_kinds.h python_runtime()).
struct PythonRuntime {
  std::string python;           // --python; "" = python_interpreter("")
  int procs = 0;                // --python-procs; 0 = available_cores()
  double sample_timeout_s = 60;  // --sample-timeout
  // Set by the roles: the most shared memory the processes map together (0 = 4 GiB each),
  // and how many start at once (0 = all).
  uint64_t shm_bytes = 0;
  int start_procs = 0;
};

// The interpreter, processes, timeout and worker script `runtime` asks for
// (find_dataset_worker()), without FILE and NAME. Throws ConfigError when the script
// cannot be found.
PythonPoolOptions python_runtime_options(const PythonRuntime& runtime);

// The interpreter --python names: itself when set, else $TANDEM_PYTHON (the wheel's
// `tandem` command sets it to the Python it was installed into), else /usr/bin/python3
// (Debian's python3-torch loads only there), else python3 on PATH. Also runs `tandem
// launch --script`.
std::string python_interpreter(const std::string& python);

// What the dataset said about itself at start.
struct PythonDatasetAbout {
  uint64_t len = 0;                    // len(dataset)
  std::optional<int64_t> num_classes;  // its num_classes attribute, if any
  std::optional<std::vector<std::string>> classes;  // its classes attribute (as str), if any
  std::vector<std::string> ragged_fields;  // its ragged_fields attribute: fields whose first dimension varies
  // With describe_native: what tandem needs to make it natively (a JSON object: root,
  // classes, count, list_file, steps, transform), or "" and why not.
  std::string native_json;
  std::string native_reason;
};

// One field of a sample as the process returned it: an array (bytes in the process's
// shared memory) or a number (a Python int, float or bool).
struct SampleField {
  std::string dtype;                          // numpy's name ("uint8", "int64", "float64", "bool"), or the
                                              // Python type of a value that is neither array nor number
  std::optional<std::vector<int64_t>> shape;  // [] for a number; empty optional for neither
  bool is_array = false;
  int64_t integer = 0;  // the value of an int or bool
  double real = 0;      // the value of a float (and of an int)
  std::span<const std::byte> bytes;  // an array's bytes, valid only inside PythonProcessPool::run's callback
};
// A sample's fields in the order the sample gave them.
using SampleFields = std::vector<std::pair<std::string, SampleField>>;

// The user's code could not make one sample: an exception (its message names the index,
// file:line and the last frames), a process it killed twice, or --sample-timeout. A
// bad sample, as an undecodable file is.
class PythonSampleError : public DataError {
 public:
  using DataError::DataError;
};

class PythonProcessPool {
 public:
  // Starts opts.procs processes and waits (opts.start_timeout_s) until each has built
  // the dataset. Throws ConfigError with the Python error (an import error, a wrong
  // NAME, bad arguments) or why a process could not start.
  explicit PythonProcessPool(PythonPoolOptions opts);
  // Ends the processes: closes their sockets, SIGTERM, and SIGKILL after a second.
  ~PythonProcessPool();
  PythonProcessPool(const PythonProcessPool&) = delete;
  PythonProcessPool& operator=(const PythonProcessPool&) = delete;

  // Starts the processes opts.start_procs left for later and waits until each has built
  // the dataset (ConfigError as the constructor's). For a pool that started one to ask
  // what the dataset is, and then serves it itself.
  void start_rest();

  const PythonDatasetAbout& about() const { return about_; }
  const PythonPoolOptions& options() const { return opts_; }

  // Makes dataset[index] in a free process, seeded with `seed`, and calls `use` with its
  // fields while that process's shared memory still holds them. A process that dies is
  // restarted and the sample tried once more in another; one over --sample-timeout is
  // killed (and restarted). Thread-safe: concurrent calls use different processes.
  // Throws PythonSampleError when the sample cannot be made (see above) and DataError
  // when no process becomes free or restarts in time. Exceptions from `use` pass through.
  void run(uint64_t index, uint64_t seed, const std::function<void(const SampleFields&)>& use) const;

  // Makes many samples at once in one free process: items are {index, seed}; one request
  // and one reply for them all, each sample seeded as run() seeds it (the dataset's
  // __getitems__ when it has one and draws no randomness of its own, else __getitem__
  // for each). Calls `use(i, fields, "")` for each sample made, while the process's shared
  // memory holds them all, and `use(i, nullptr, error)` for one that raised (error as
  // run()'s PythonSampleError says it). Samples it could not make together (their
  // process died or hung, or they did not fit in its shared memory) get
  // `use(i, nullptr, "")`: make them with run(), which retries and says why.
  // Exceptions from `use` pass through.
  using ManyUse = std::function<void(size_t i, const SampleFields* fields, const std::string& error)>;
  void run_many(const std::vector<std::pair<uint64_t, uint64_t>>& items, const ManyUse& use) const;

  // For a Kind::kFunction pool: calls FUNCTION on a uint8 array of `shape` holding `input`
  // (passed through the process's shared memory), seeded with `seed`, and calls `use` with
  // what it returned: one field "output", or the fields of a dict it returned. Otherwise
  // as run(). REQUIRES: input.size() is the product of `shape`.
  void call(uint64_t index, uint64_t seed, std::span<const uint8_t> input, const std::vector<int64_t>& shape,
            const std::function<void(const SampleFields&)>& use) const;

  // "sample N of python:FILE:NAME", or "sample N in --pipeline step python(FILE:FUNCTION)":
  // the words every error about sample N begins with.
  std::string describe(uint64_t index) const;

  // One sample to make more than once: {index, seed}, and for a Kind::kFunction pool the
  // uint8 array of `shape` FUNCTION is called on.
  struct Probe {
    uint64_t index = 0;
    uint64_t seed = 0;
    std::span<const uint8_t> input = {};
    std::vector<int64_t> shape = {};
  };
  // Users' code must be deterministic (docs/datasets.md): makes each probe twice in the
  // first process and once in a second (the first again when there is one), and returns
  // the indices whose fields differ between those three; empty when all agree. A sample
  // that fails or hangs is left out (its error comes when it is asked for).
  std::vector<uint64_t> unrepeatable(const std::vector<Probe>& probes) const;

  // The process ids now serving (for tests that kill one).
  std::vector<pid_t> pids() const;

 private:
  struct Process;
  class Lease;
  Process& acquire(int which = -1) const;  // which: that process (waits for it), -1 any
  // A hash of `probe`'s fields made by process `which`; nullopt when it failed.
  std::optional<uint64_t> digest_in(int which, const Probe& probe) const;
  void release(Process& p) const;
  // run_many() after process `p` failed n samples together: restarts it, and hands them
  // back to be made alone.
  void make_alone(Process& p, size_t n, const ManyUse& use, const std::string& why) const;
  void restart(Process& p) const;
  void build_in(const std::vector<Process*>& started);  // their start: the dataset built
  void serve(uint64_t index, const nlohmann::json& request, std::span<const uint8_t> input,
             const std::function<void(const SampleFields&)>& use) const;

  PythonPoolOptions opts_;
  PythonDatasetAbout about_;
  std::vector<std::unique_ptr<Process>> procs_;
  mutable std::mutex mu_;
  mutable std::condition_variable freed_;
  mutable int waiting_ = 0;  // GUARDED_BY(mu_): threads waiting for a free process
  // A request of many samples found hung: __getitems__ is no longer asked for (its
  // processes make each sample alone, each with its own --sample-timeout).
  mutable std::atomic<bool> batched_hung_{false};
};

// Where _dataset_worker.py is: $TANDEM_DATASET_WORKER, else beside the running binary
// (<exe dir>/python/tandem/, the build tree; <exe dir>/../python/tandem/, the tests'
// binary) or installed (<exe dir>/../share/tandem/python/tandem/). Throws ConfigError
// naming the places looked at.
std::string find_dataset_worker();

}  // namespace tandem::data
