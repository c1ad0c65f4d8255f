// Internal to the Python pool (process_pool.cc): talking to one Python process, and the
// messages of that talk, defined once here for the C++ side (python/tandem/
// _dataset_worker.py is the other side; its docstring shows the same messages).
//
// Each message is a 4-byte little-endian length and a JSON object on a socketpair; arrays
// lie in a memfd both sides map. Every wait also watches the process itself (a pidfd):
// a process that died is noticed at once, even while children it forked hold the socket.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/common/clock.h"
#include "tandem/data/python/process_pool.h"

namespace tandem::data::pool {

// Why talking to a process stopped: it is gone, or it took too long.
struct ProcessGone {
  std::string why;
};
struct ProcessSlow {};

// One process's end of the talk: its socket, and a pidfd of it (-1 where the kernel has
// none: then the wait looks at the process every 100 ms).
struct Channel {
  int sock = -1;
  int pidfd = -1;
  pid_t pid = -1;
};

// A pidfd of `pid`, or -1 where pidfd_open is missing (Linux before 5.3).
int open_pidfd(pid_t pid);

// Sends `message` before `deadline`. Throws ProcessGone or ProcessSlow.
void send_message(const Channel& c, const nlohmann::json& message, Clock::time_point deadline);

// The next message, before `deadline`. Throws ProcessGone (the process ended, closed the
// socket, or sent what is not a JSON object of at most 64 MiB) or ProcessSlow.
nlohmann::json receive_message(const Channel& c, Clock::time_point deadline);
// Whether a message is there to read by `deadline`. Throws ProcessGone when the process
// ends first.
bool wait_message(const Channel& c, Clock::time_point deadline);

// A "many" request's progress, in the first bytes of the process's shared memory, before
// the arrays (which begin at kProgressBytes): two little-endian uint64, the steps it made
// in all (a sample, or a __getitems__ call) and the samples' time the step may take: one
// --sample-timeout each, and one for a __getitems__ call of any number (a call that hangs
// is found within one sample's timeout, not n).
inline constexpr size_t kProgressBytes = 64;

// --- the messages ---------------------------------------------------------------------

// `first`: the pool's first process, asked describe_native's question when set.
nlohmann::json init_request(const PythonPoolOptions& opts, size_t max_shm, bool first = false);
nlohmann::json get_request(uint64_t index, uint64_t seed);
// Many samples in one request: {"op": "many", "items": [[index, seed], ...], "batched": B}
// (B false: __getitem__ for each, not the dataset's __getitems__).
nlohmann::json many_request(const std::vector<std::pair<uint64_t, uint64_t>>& items, bool batched = true);
nlohmann::json call_request(uint64_t index, uint64_t seed, const std::vector<int64_t>& shape, size_t nbytes);

// init's answer: what the dataset said about itself. Throws nlohmann::json::exception.
PythonDatasetAbout about_of(const nlohmann::json& reply);

// A failure reply's words: "ValueError: bad (at my_data.py:12)\n  last frames".
std::string python_error(const nlohmann::json& reply);

// The fields of a sample reply, arrays as spans into `shm` (`mapped` bytes). Throws
// ProcessGone for a field placed outside it, nlohmann::json::exception for a bad reply.
SampleFields fields_of(const nlohmann::json& reply, const std::byte* shm, size_t mapped);

}  // namespace tandem::data::pool
