// A pool's batch making for several jobs at once (`tandem worker --pool-jobs`): each
// job's requests wait in its own queue and the pool's cores go to the waiting job with
// the least CPU time spent for it per unit of weight (weighted fair queueing on virtual
// time: a job that starts waiting starts at the others' time, so one that was away does
// not take the pool back for what it missed); and a request identical to one
// made or being made (the same epoch and sample indices: the same bytes, since samples
// are a pure function of the dataset, seed, epoch and index) is served from it instead
// of being made again, within a bounded window of made batches. Jobs of a sweep whose
// data, pipeline, seed and batch geometry agree ask identical requests, so each batch is
// made once and sent to each. One job's slowness never stalls another: a request older
// than the window is made again, for it alone.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tandem/data/core/batch.h"

namespace tandem::data {
class BatchMaker;
}  // namespace tandem::data

namespace tandem::transport {

struct SharedMakerOptions {
  uint64_t window_bytes = 0;  // made batches kept for other jobs' identical requests; 0 = none shared
  int in_flight = 2;          // batches in the maker at once (the fair share picks the next)
};

// What the pool did for one job.
struct JobTally {
  uint64_t batches = 0;          // served to it
  uint64_t samples_served = 0;
  uint64_t samples_made = 0;     // made for it (its own requests, first asked by it)
  uint64_t samples_shared = 0;   // served from a batch another job's request made
  double compute_seconds = 0;    // CPU-seconds of the batches made for it
  double weight = 1;
};

// A copy of `b` (its bytes, labels, indices and fields), as request `sequence` of its stream.
data::Batch copy_batch(const data::Batch& b, uint64_t sequence);

class SharedMaker {
 public:
  using Done = std::function<void(data::Batch)>;
  using Failed = std::function<void(std::exception_ptr)>;

  explicit SharedMaker(SharedMakerOptions opts);
  ~SharedMaker();  // REQUIRES: nothing in flight (the maker's pool is drained first)

  // Makes `request` for `job` (of `weight` > 0) with `maker` (its dataset's), or serves
  // it from an identical one of the same maker; exactly one of done / failed runs, on a
  // pool thread or the caller's. REQUIRES: `maker` outlives this.
  void make(const std::string& job, double weight, data::BatchMaker& maker, data::BatchRequest request, Done done,
            Failed failed);

  // Requests not yet started fail (their streams are gone or going): the worker stops.
  void stop();

  std::map<std::string, JobTally> tallies() const;
  uint64_t window_batches() const;

 private:
  struct Waiter {
    std::string job;
    uint64_t sequence;
    Done done;
    Failed failed;
  };
  struct Entry {
    const data::BatchMaker* maker = nullptr;
    uint32_t epoch = 0;
    std::vector<uint64_t> indices;
    bool made = false;
    std::shared_ptr<const data::Batch> batch;  // once made, while in the window
    std::vector<Waiter> waiters;               // while being made; the first asked first
  };
  struct Pending {
    uint64_t key;
    data::BatchMaker* maker;
    data::BatchRequest request;
  };
  // A job's place in the fair share: CPU-seconds per unit of weight spent for it, with
  // its batches being made charged at its average cost until they finish.
  struct Share {
    double vtime = 0;
    double per_sample = 0;  // CPU-seconds, the average of its batches made so far
    std::map<uint64_t, double> charged;  // by key: what each batch in the maker was charged
  };

  static uint64_t key_of(const data::BatchMaker& maker, const data::BatchRequest& r);
  Entry* find(uint64_t key, const data::BatchMaker& maker, const data::BatchRequest& r);
  void dispatch();
  const std::string* next_job() const;  // REQUIRES: mu_ held
  void finished(uint64_t key, data::Batch batch);
  void failed(uint64_t key, std::exception_ptr e);
  void keep(uint64_t key);  // REQUIRES: mu_ held

  const SharedMakerOptions opts_;
  mutable std::mutex mu_;
  uint64_t next_private_ = 0;                          // GUARDED_BY(mu_): keys when nothing is shared
  std::unordered_map<uint64_t, Entry> entries_;        // GUARDED_BY(mu_)
  std::deque<uint64_t> kept_;                          // GUARDED_BY(mu_): made entries, oldest first
  uint64_t kept_bytes_ = 0;                            // GUARDED_BY(mu_)
  std::map<std::string, std::deque<Pending>> queues_;  // GUARDED_BY(mu_)
  std::map<std::string, JobTally> tallies_;            // GUARDED_BY(mu_)
  std::map<std::string, Share> shares_;                // GUARDED_BY(mu_)
  void start_waiting(const std::string& job);          // REQUIRES: mu_ held
  void charge(const std::string& job, uint64_t key, double seconds, uint64_t samples);  // REQUIRES: mu_ held
  int in_maker_ = 0;                                   // GUARDED_BY(mu_)
  bool stopped_ = false;                               // GUARDED_BY(mu_)
};

}  // namespace tandem::transport
