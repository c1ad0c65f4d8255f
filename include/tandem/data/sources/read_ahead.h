// Reading ahead of the cores, for slow storage (network file systems, S3 through FastFile
// or Mountpoint: tens of milliseconds to the first byte). The file datasets (imagefolder,
// webdataset, manifest) hand the samples a batch will need to a ReadAhead as soon as the
// batch is asked for; its I/O threads (--io-threads) fetch their bytes with many reads at
// once, and a preprocessing thread takes them from memory when it reaches the sample.
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

class ThreadPool;

// One sample's stored bytes as read, or what went wrong reading them ("cannot open: ...").
struct Fetched {
  std::vector<uint8_t> bytes;
  std::string problem;
  double cpu_seconds = 0;  // the I/O thread's CPU time reading them
};

// The reads in flight for --io-threads `requested`: itself when 0 or more; for -1 ("auto")
// 32 per core this process may use (available_cores()), 64 to 1024. A preprocessing thread makes about 1,000 small
// images/s (500x375 JPEG, RandomResizedCrop(224)), and keeping it fed from storage that
// takes 20-30 ms a read needs 20-30 reads in flight for it.
int io_threads_for(int requested);

struct ReadAheadOptions {
  int io_threads = 32;              // concurrent reads (--io-threads); REQUIRES >= 1
  uint64_t max_bytes = 256 << 20;   // fetched bytes not yet taken, at most (a soft limit: reads
                                    // in progress may pass it by one sample each)
};

class ReadAhead;

// The fetches of one batch's samples, by position in the batch. The batch's maker holds it
// until every sample is made; dropping it gives back the bytes no one took. Thread-safe.
class SampleReads {
 public:
  ~SampleReads();
  SampleReads(const SampleReads&) = delete;
  SampleReads& operator=(const SampleReads&) = delete;

  // The bytes of the sample at `position`: waits while an I/O thread is reading them and
  // takes them once read. nullopt when no I/O thread has started on it (queued behind
  // others, or held back by the memory limit), or it was taken already: the caller reads
  // it itself, so a preprocessing thread never waits for a read that has not begun.
  // The read's CPU time is added to the taking thread's work (add_helper_cpu_seconds), so
  // a batch's compute time, and the plan's per-thread rate, count the I/O threads too.
  std::optional<Fetched> take(size_t position);

 private:
  friend class ReadAhead;
  struct Batch;
  explicit SampleReads(std::shared_ptr<Batch> batch) : batch_(std::move(batch)) {}
  std::shared_ptr<Batch> batch_;  // shared with the I/O tasks of its samples
};

class ReadAhead {
 public:
  // `read(key)` reads one sample's bytes: the I/O threads run it, many at once, so it must
  // be thread-safe. The threads start with the first start().
  ReadAhead(ReadAheadOptions opts, std::function<Fetched(uint64_t key)> read);
  // Reads in progress finish; queued ones are dropped.
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Queues a read of every key (position i of the result is keys[i]), behind the reads
  // already queued: batches asked for first are fetched first.
  std::unique_ptr<SampleReads> start(const std::vector<uint64_t>& keys);

  // Bytes fetched and not yet taken, now.
  uint64_t held_bytes() const;
  // How often an I/O task waiting for room under the byte limit was woken and had to wait
  // again: the cost of a wake-up that reached the wrong thread (a test's measure).
  uint64_t idle_wakeups() const;
  const ReadAheadOptions& options() const { return opts_; }

  struct Core;  // what the I/O threads and every batch's reads share (read_ahead.cc)

 private:
  void fetch(const std::shared_ptr<SampleReads::Batch>& batch, size_t position);

  const ReadAheadOptions opts_;
  const std::function<Fetched(uint64_t)> read_;
  std::shared_ptr<Core> core_;
  std::once_flag started_;
  std::unique_ptr<ThreadPool> pool_;  // the I/O threads, started by the first start()
};

}  // namespace tandem::data
