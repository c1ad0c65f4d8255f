// Preprocessing on the trainer host's own spare cores, in-process: no gRPC hop.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tandem/data/batching/batch_maker.h"
#include "tandem/feed/scheduler.h"

namespace tandem::feed {

// The scheduler's name for this process's own preprocessing threads.
using report::kLocalSource;

class LocalSource {
 public:
  // Starts `threads` threads, each building whole batches. For a dataset that reads its
  // files ahead (Dataset::read_ahead_bytes() > 0) it holds one more request per thread,
  // taken by a thread of its own that starts fetching the request's files at once, so
  // that the makers find their bytes in memory. REQUIRES: threads >= 1.
  LocalSource(Scheduler& scheduler, std::shared_ptr<const data::Dataset> dataset, int threads,
              data::DType wire = data::DType::kFloat32);
  // REQUIRES: scheduler.close() was called or every batch was delivered.
  ~LocalSource();
  LocalSource(const LocalSource&) = delete;
  LocalSource& operator=(const LocalSource&) = delete;

 private:
  struct Ahead {
    data::BatchRequest request;
    std::unique_ptr<data::SampleReads> reads;
  };
  void run();        // without read-ahead: acquire, make, complete
  void dispatch();   // with: acquire and start the reads ...
  void make_ahead(); // ... and make what dispatch() queued
  void make(const data::BatchRequest& request, data::SampleReads* reads);

  Scheduler& scheduler_;
  data::BatchMaker maker_;
  int id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Ahead> queue_;  // GUARDED_BY(mu_): acquired, its reads started, not yet taken
  bool ended_ = false;       // GUARDED_BY(mu_): nothing more to make (closed, done or failed)
  std::vector<std::thread> threads_;
};

}  // namespace tandem::feed
