// Reading ahead of the cores, for slow storage (network file systems, S3 through FastFile
// or Mountpoint: tens of milliseconds to the first byte). The file datasets (imagefolder,
// webdataset, manifest) hand the samples a batch will need to a ReadAhead as soon as the
// batch is asked for; it keeps many reads in flight at once, and a preprocessing thread
// takes the bytes from memory when it reaches the sample.
//
// How many reads: as many samples ahead of the takers as they take in one read's latency
// (Little's law: rate x latency, both measured as it runs; read_depth.h), within the bytes
// it may hold. Where the samples asked for so far cannot cover that, every batch says how
// many more it wants (wanted_more()), and whoever asks for batches (the trainer's
// scheduler, `bench pipeline`) asks for more (request_depth.h).
//
// How reads fly: on io_uring (liburing) one thread drives thousands of reads, each an open,
// a size and a read queued to the kernel; where io_uring is not allowed (a container's
// seccomp profile), a pool of I/O threads that grows to the reads in flight, each blocked
// in one read at a time (read_engines.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tandem::data {

// One sample's stored bytes as read, or what went wrong reading them ("cannot open: ...").
struct Fetched {
  std::vector<uint8_t> bytes;
  std::string problem;
  // The problem is this host's, not the sample's: it ran out of open files or memory.
  // Not a bad sample: the request fails as an overloaded worker's, and is made again.
  bool host_fault = false;
  double cpu_seconds = 0;       // the I/O side's CPU time reading them
  std::vector<uint8_t> header;  // ReadPlan::header bytes read just before them
};

// What one sample's read fetches, for the engines to carry out (read_engines.h).
struct ReadPlan {
  std::string path;
  // A range: `bytes` bytes from `offset`, after the `header` bytes before it (a tar
  // member's header, checked by the dataset). A whole file (whole = true): its size from
  // the file, checked against `bytes` when that is not 0 (the size it had when listed).
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint32_t header = 0;
  bool whole = false;
  bool member = false;  // words of its problems: "cannot open the shard" for a member
  std::string problem;  // not "": the read fails with it, doing nothing (an index that cannot be right)
  // The most bytes one sample's read may take: a file larger is a bad sample named with
  // its size, never an allocation of its size (a 1 TiB sparse file). A read-ahead lowers it
  // to its --max-inflight-mb share (plan()).
  uint64_t most_bytes = kMostReadBytes;
  static constexpr uint64_t kMostReadBytes = uint64_t{1} << 30;
};

// How the reads of a dataset are done: the plan of each key, and what to check once its
// bytes are in (may set Fetched::problem). Both run on the I/O side: thread-safe.
struct ReadSource {
  std::function<ReadPlan(uint64_t key)> plan;
  std::function<void(uint64_t key, Fetched&)> check;
};

// A plan read on the calling thread (open, fstat, preadv, close): what a dataset does
// for a sample it reads without its read-ahead.
Fetched read_blocking(const ReadPlan& plan);

// The reads in flight at most for --io-threads `requested`: itself when 0 or more; for -1
// ("auto") 32 per core this process may use (available_cores()), 64 to 1024, on I/O
// threads. A preprocessing thread makes about 1,000 small images/s (500x375 JPEG,
// RandomResizedCrop(224)), and keeping it fed from storage that takes 20-30 ms a read
// needs 20-30 reads in flight for it.
int io_threads_for(int requested);
// The same on io_uring, where a read in flight costs no thread: `requested` when 0 or
// more, else (auto) 4096; the bytes it may hold bound it further.
int uring_reads_for(int requested);

enum class IoEngine { kAuto, kUring, kThreads };
// "auto" | "uring" | "threads" (--io-engine); throws ConfigError naming the choices.
IoEngine parse_io_engine(const std::string& name);
const char* io_engine_name(IoEngine engine);

struct ReadAheadOptions {
  int io_threads = 32;              // reads in flight at most (--io-threads); -1: auto, by engine
                                    // (io_threads_for(), uring_reads_for())
  uint64_t max_bytes = 256 << 20;   // fetched bytes not yet taken, and reads in flight, at most
  IoEngine engine = IoEngine::kAuto;  // kAuto: io_uring where the kernel allows it, else threads
  double latency_s = 0;             // added before each read (--emulate-read-latency-ms)
};

class ReadAhead;

// The fetches of one batch's samples, by position in the batch. The batch's maker holds it
// until every sample is made; dropping it gives back the bytes no one took. Thread-safe.
class SampleReads {
 public:
  ~SampleReads();
  SampleReads(const SampleReads&) = delete;
  SampleReads& operator=(const SampleReads&) = delete;

  // The bytes of the sample at `position`: waits while its read is in flight and takes
  // them once read. nullopt when its read has not begun (queued behind others, or held
  // back by the memory limit), or it was taken already: the caller reads it itself, so a
  // preprocessing thread never waits for a read that has not begun.
  // The read's CPU time is added to the taking thread's work (add_helper_cpu_seconds), so
  // a batch's compute time, and the plan's per-thread rate, count the I/O side too.
  std::optional<Fetched> take(size_t position);

  // Samples more the read-ahead would like to know of now (ReadAhead::wanted_more()).
  int64_t wanted_more() const;

  struct Batch;  // its samples' slots, shared with their reads (read_ahead.cc)

 private:
  friend class ReadAhead;
  explicit SampleReads(std::shared_ptr<Batch> batch) : batch_(std::move(batch)) {}
  std::shared_ptr<Batch> batch_;  // shared with the reads of its samples
};

class ReadAhead {
 public:
  // Reads through `source` on the engine opts.engine names (kAuto: io_uring if it starts).
  ReadAhead(ReadAheadOptions opts, ReadSource source);
  // Reads by calling `read(key)` on I/O threads, many at once (it must be thread-safe and
  // does its own waiting; opts.engine and opts.latency_s are not used).
  ReadAhead(ReadAheadOptions opts, std::function<Fetched(uint64_t key)> read);
  // Reads in progress finish (at most a few seconds); queued ones are dropped.
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Queues a read of every key (position i of the result is keys[i]), behind the reads
  // already queued: batches asked for first are fetched first.
  std::unique_ptr<SampleReads> start(const std::vector<uint64_t>& keys);

  // Samples the takers should have ahead of them (queued, in flight or read; read_depth.h)
  // less those they have now: positive when more should be asked for, negative when more
  // are asked for than needed.
  int64_t wanted_more() const;

  // Now: bytes fetched and not yet taken; reads in flight, and the most there were at once.
  uint64_t held_bytes() const;
  uint64_t in_flight() const;
  uint64_t most_in_flight() const;
  // How often an I/O thread woken for a read found none it could start: the cost of a
  // wake-up that reached the wrong thread (a test's measure).
  uint64_t idle_wakeups() const;
  // The engine the reads run on (kUring or kThreads), and the I/O threads started so far.
  IoEngine engine() const;
  int threads() const;
  const ReadAheadOptions& options() const { return opts_; }

  struct Core;  // the reads' state, shared with their engine (read_ahead.cc)

 private:
  const ReadAheadOptions opts_;
  std::shared_ptr<Core> core_;
};

}  // namespace tandem::data
