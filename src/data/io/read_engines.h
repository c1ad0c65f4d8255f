// The reads of a ReadAhead (read_ahead.h) as its engines see them: the state they share
// (Core), one read from plan to bytes as steps both engines drive (ReadSteps), and the two
// engines: I/O threads blocked in one read each, and io_uring.
#pragma once

#include <sys/uio.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tandem/common/clock.h"
#include "tandem/data/io/read_ahead.h"
#include "tandem/data/io/read_depth.h"

namespace tandem::data {

// One sample's read, from the queue to its slot.
struct ReadJob {
  std::shared_ptr<SampleReads::Batch> batch;
  size_t position = 0;
  uint64_t key = 0;
  uint64_t reserved = 0;  // bytes counted in flight for it (the mean read's)
  Clock::time_point began{};
};

// What an engine does for the Core: run the reads it hands out.
class ReadEngine {
 public:
  virtual ~ReadEngine() = default;
  // Reads may start now (queued, or room was given back): take them (Core::next_job).
  virtual void wake() = 0;
  // Ends: reads in flight finish or are cancelled; returns when none is left running.
  virtual void stop() = 0;
  virtual IoEngine kind() const = 0;
  virtual int threads() const = 0;
};

struct ReadAhead::Core {
  Core(const ReadAheadOptions& opts, ReadSource src)
      : max_bytes(opts.max_bytes), latency_s(opts.latency_s), source(std::move(src)), depth(Clock::now()) {}

  // Whether a queued read may start: one is queued, fewer than max_in_flight fly, and the
  // bytes held and in flight are under max_bytes. REQUIRES: mu held.
  bool can_start() const;
  // Pops the next read that may start, marks it in flight and counts its bytes; nullopt
  // when none may (can_start()). REQUIRES: mu held.
  std::optional<ReadJob> next_job();
  // A read ended: its bytes go to its slot (or are dropped, its batch gone), and a taker
  // waiting for it wakes. The engine that called it starts the next reads itself. Takes mu.
  void finish(ReadJob& job, Fetched fetched);
  // Samples the takers should have ahead (depth.wanted()) less the queued, in flight and
  // held ones (ReadAhead::wanted_more()). REQUIRES: mu held.
  int64_t wanted_more() const;
  // The read of `job` on the calling thread: the emulated latency, the plan, the check.
  Fetched read_now(const ReadJob& job) const;
  // The source's plan of `key`, bounded by the bytes this read-ahead may hold.
  ReadPlan plan(uint64_t key) const;

  int max_in_flight = 1;  // set with the engine, before the first start()
  const uint64_t max_bytes;
  const double latency_s;
  const ReadSource source;

  std::mutex mu;
  std::condition_variable ready;  // a slot left kReading
  std::deque<ReadJob> queue;      // GUARDED_BY(mu): reads not begun, first asked first
  uint64_t held = 0;              // GUARDED_BY(mu): fetched bytes not yet taken
  uint64_t held_samples = 0;      // GUARDED_BY(mu): and their samples
  uint64_t in_flight = 0;         // GUARDED_BY(mu)
  uint64_t in_flight_bytes = 0;   // GUARDED_BY(mu): ReadJob::reserved of those
  uint64_t most_in_flight = 0;    // GUARDED_BY(mu)
  uint64_t idle_wakeups = 0;      // GUARDED_BY(mu)
  bool stopping = false;          // GUARDED_BY(mu)
  ReadDepth depth;                // GUARDED_BY(mu)
  std::unique_ptr<ReadEngine> engine;  // set once, before the first start()
};

// One read from plan to bytes, as steps an engine drives: it does the step's system call
// (open, a size, a read) and hands the result to the matching method, until done().
// The blocking engine and io_uring share it, so that their bytes and their words agree.
class ReadSteps {
 public:
  enum class Step { kOpen, kSize, kRead, kDone };
  explicit ReadSteps(ReadPlan plan);

  Step step() const { return step_; }
  bool done() const { return step_ == Step::kDone; }
  const ReadPlan& plan() const { return plan_; }
  // The file descriptor once opened (-1 before, or when the open failed); the engine
  // closes it when done().
  int fd() const { return fd_; }

  // Each takes what the call returned: a count or a descriptor, or -errno.
  void opened(int result);
  // result 0: the file has `size` bytes, and is a regular file or not (a FIFO, a device:
  // refused, as both engines open without blocking)
  void sized(int result, uint64_t size, bool regular);
  // For Step::kRead: where to read into and from where in the file.
  std::pair<const iovec*, int> read_into() const;
  uint64_t read_at() const { return at_; }
  void read(long result);

  // The bytes (or the problem), once done().
  Fetched take() { return std::move(out_); }

 private:
  void fail(std::string problem, bool host_fault = false);
  void begin_reading(uint64_t size);

  ReadPlan plan_;
  Step step_ = Step::kOpen;
  int fd_ = -1;
  uint64_t at_ = 0;    // file offset of the next read
  uint64_t left_ = 0;  // bytes still to read
  iovec parts_[2]{};   // header, bytes: what is left of them
  int first_ = 0;
  Fetched out_;
};

// I/O threads, started as reads wait and none is free, up to `max_threads`; each runs
// `read` on one job at a time.
std::unique_ptr<ReadEngine> make_thread_engine(ReadAhead::Core& core, int max_threads,
                                               std::function<Fetched(const ReadJob&)> read);
// io_uring with `entries` reads in flight at most; null, with `why` set, where it cannot
// start (a kernel or a seccomp profile without it).
std::unique_ptr<ReadEngine> make_uring_engine(ReadAhead::Core& core, int entries, std::string& why);

}  // namespace tandem::data
