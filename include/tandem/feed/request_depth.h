// How many requests to keep in flight to one source of batches that reads ahead from slow
// storage. A source's read-ahead can keep only as many reads in flight as the samples it
// was asked for; each batch it makes says how many more it wants (Batch::reads_wanted:
// its reads' rate x latency, less what it knows of). The depth rises to cover that at
// once, and falls one request at a time while the source has two batches more than it
// wants, never under where it began nor over the memory's bound.
#pragma once

#include <cstdint>

namespace tandem::feed {

class RequestDepth {
 public:
  // `base`: the depth without reads to cover (--inflight); `most`: the bound that memory
  // sets (the trainer's batches in flight). REQUIRES: 1 <= base.
  RequestDepth(int base, int most);

  // A batch of `batch_size` samples came back saying `wanted` (Batch::reads_wanted)
  // while `in_flight` requests were out to its source. Returns the new depth.
  int update(int64_t wanted, int in_flight, int64_t batch_size);

  int depth() const { return depth_; }
  int base() const { return base_; }
  int most() const { return most_; }
  int deepest() const { return deepest_; }  // the deepest it went

 private:
  int base_;
  int most_;
  int depth_;
  int deepest_;
};

// The most batches a trainer's rank requests ahead when its sources' reads want more
// (SchedulerOptions::max_prefetch): what a sixteenth of the memory available, at most
// 4 GiB, holds of batches of `batch_bytes`, at most 1024, and never under `prefetch`.
int max_prefetch(int prefetch, uint64_t batch_bytes);

}  // namespace tandem::feed
