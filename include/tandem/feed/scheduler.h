// The feeder's logic, free of any transport: hands batch requests to whichever source
// has room, re-issues a failed source's requests to the others, and delivers finished
// batches to the training loop in sequence order. Sources pull work (acquire) rather
// than being pushed to, so a faster source simply asks more often: load balancing by
// construction. A source slower per batch than the prefetch window lasts (the trainer's
// own few threads beside fast workers) is given batches due later, ones it can finish
// before the loop needs them, so that it adds its batches without stalling the line.
// Tested without a network; gRPC and in-process sources plug into it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tandem/common/clock.h"
#include "tandem/data/core/batch.h"
#include "tandem/feed/request_depth.h"
#include "tandem/report/run_records.h"

namespace tandem::feed {

struct SchedulerOptions {
  uint64_t total_batches = 0;    // sequences first_batch .. total_batches-1 are delivered
  int prefetch = 16;             // requested-but-unconsumed batches, at most (bounds memory)
  double batch_timeout_s = 120;  // next() gives up after this long without its batch
  uint64_t first_batch = 0;      // where a resumed run starts
  // Two copies of one batch (a hedged request answered by both sources) that differ are
  // an error from next(), not a warning (--require-deterministic).
  bool require_deterministic = false;
  // Sources may join while it runs (a watch file, a DNS name): when every source has
  // failed or left, next() waits for a new one up to batch_timeout_s instead of failing.
  bool sources_may_join = false;
  // How far the prefetch window and a source's request depth may grow while its batches
  // say its reads from slow storage want more requests (Batch::reads_wanted,
  // request_depth.h): the memory's bound, in batches. 0 or less than prefetch: prefetch.
  int max_prefetch = 0;
};

// What each source delivered: a record the report reads (report/run_records.h).
using SourceStats = report::SourceStats;

class Scheduler {
 public:
  using RequestFactory = std::function<data::BatchRequest(uint64_t sequence)>;

  Scheduler(RequestFactory make_request, SchedulerOptions opts);

  // Registers a source that may hold up to `window` requests at once. Returns its id.
  int add_source(std::string name, int window);

  // Source side. Blocks until `source` has room and a request is due. Returns nullopt
  // once there is nothing left to do for it: closed, finished, or the source failed.
  std::optional<data::BatchRequest> acquire(int source);
  // A finished batch. Ignored if that request is no longer the source's (re-issued).
  void complete(int source, data::Batch batch);
  // The source is gone: its outstanding requests go back to the queue for the others.
  // Calling it again only replaces the recorded reason. `may_return`: it is being
  // retried, so while it might come back next() waits (up to batch_timeout_s) instead of
  // giving up when every source is down. `bad_data`: it failed on the data itself (a file
  // it could not use); when every source did, next() throws DataError, not NetworkError.
  void fail(int source, const std::string& why, bool may_return = false, bool bad_data = false);
  // A source that failed with may_return serves again: it acquires work as before,
  // first re-making the latest batch already made (by any source), whose digest is
  // compared with the first copy's: a worker that restarted with code that is not
  // deterministic is caught at its rejoin.
  // `rejoined`: it served before (counted in its rejoins), not a first join of a worker
  // that was not answering at the start.
  void revive(int source, bool rejoined = true);
  // A source being retried gives up for good (its retries ran out).
  void abandon(int source, const std::string& why);
  // How many threads make the source's batches (a worker's Info; scaling.h).
  void set_threads(int source, int threads) {
    std::lock_guard lock(mu_);
    sources_.at(source).stats.threads = threads;
  }

  // The source takes no more work: a parked acquire() returns nullopt. Its outstanding
  // requests stay its own until complete() or fail(). Lets a transport stop its writer
  // before it knows why its stream ended.
  void retire(int source);
  // The source leaves for good (`why`: a draining worker, an address no longer listed):
  // it takes no more work and answers what it holds; fail() still re-issues that if its
  // stream breaks first. `answers`: the worker itself said it answers them (its leaving
  // notice), so they are not hedged; else (delisted, perhaps dead) they may be.
  void leave(int source, const std::string& why, bool answers);
  // A source that left (its address no longer listed) is listed again: it is a source
  // being retried (as after fail() with may_return), taken back by revive() once it
  // answers. REQUIRES: it left and its link stopped streaming.
  void rejoin(int source, const std::string& why);

  // Consumer side. The next batch in sequence order, or nullopt after the last one.
  // Throws NetworkError when every source has failed or batch_timeout_s passes.
  std::optional<data::Batch> next();

  // Wakes every waiter; acquire() then returns nullopt. Idempotent.
  void close();

  // Every source's numbers so far, in the order they were added (add_source's ids).
  // Thread-safe; stays readable after close().
  std::vector<SourceStats> stats() const;
  // Requests re-issued to a second source because they were late (first answer wins).
  uint64_t hedged() const;
  // Batches that came twice (a hedged request both sources answered, or the batch a
  // rejoining source re-made) with different
  // bytes: one line each (at most 16), naming the batch, its samples and both sources.
  std::vector<std::string> determinism_problems() const;
  // Seconds next() spent waiting for data, in total.
  double wait_seconds() const;
  // Requests given to a source and not answered yet.
  size_t in_flight() const {
    std::lock_guard lock(mu_);
    return outstanding_.size();
  }

 private:
  struct Source {
    SourceStats stats;
    RequestDepth depth{1, 1};  // its window follows its reads' wants
    int window = 1;            // depth.depth()
    int inflight = 0;
    bool retired = false;
    bool may_return = false;  // failed, but being retried
    bool leaving = false;     // leave(): for good
    bool answers = false;     // leave(..., answers): its requests are not hedged
    bool bad_data = false;    // failed on the data itself
    std::deque<uint64_t> checks;  // batches made before, to make again (revive())
    std::optional<double> latency;  // seconds from acquire to answer, smoothed
  };
  // Who holds an outstanding request: its owner, and a second source when the request
  // was late and re-issued (hedged); the first answer wins.
  struct Ticket {
    int owner = -1;
    Clock::time_point since;
    int hedge = -1;
    Clock::time_point hedge_since;
  };
  void fail_locked(int source, const std::string& why, bool may_return, bool bad_data);  // REQUIRES: mu_
  bool has_work_for(int id) const;
  // The prefetch window now: --prefetch, and what sources whose reads want more were
  // allowed beyond their base depth (beyond_), up to max_prefetch.
  uint64_t prefetch_now() const;
  // A batch from `s` came back: its depth follows what its reads want.
  void follow_reads(Source& s, const data::Batch& batch);
  // The never-issued sequence `id` would take now, or nullopt: next_new_ within the
  // prefetch window, or, for a source too slow for that one while another live source
  // is fast enough, the first free sequence it can make before it is due.
  std::optional<uint64_t> new_sequence_for(int id) const;
  // A sequence given out already: outstanding or made.
  bool taken(uint64_t seq) const { return outstanding_.count(seq) > 0 || ready_.count(seq) > 0; }
  // The consumer's own time per batch (between next() returning and being called
  // again, its waits left out): the median of the last ones, once there are 4.
  std::optional<double> consumer_interval() const;
  // Whether a source with this latency makes `seq` before the consumer needs it.
  bool in_time(double latency, uint64_t seq, double interval) const;
  // The first queued re-issue `id` may take (not a hedge of its own request), or -1.
  long retry_index_for(int id) const;
  bool all_failed() const;
  std::string failure_summary() const;
  // How late a request may be before it is hedged: twice the 90th percentile of recent
  // answers, at least 250 ms; none until 8 answers were seen.
  std::optional<Clock::duration> hedge_margin() const;
  void maybe_hedge(Clock::time_point now);

  RequestFactory make_request_;
  SchedulerOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // A deque, so a Source stays put while sources are added: acquire() holds a reference
  // to its own across waits, and sources may start before the last one is added.
  std::deque<Source> sources_;                  // GUARDED_BY(mu_)
  std::deque<uint64_t> retry_;                  // GUARDED_BY(mu_): re-issue first
  std::map<uint64_t, Ticket> outstanding_;      // GUARDED_BY(mu_): sequence -> holders
  // The latest batch made, by whom, and its digest: what a rejoining source re-makes.
  // A copy of a batch: its digest, over its bytes on the wire, which only a copy of the
  // same wire dtype can match (a uint8 worker's and a float32 worker's differ by design).
  struct Copy {
    uint64_t digest = 0;
    data::DType dtype = data::DType::kFloat32;
    int source = -1;
  };
  struct Made {
    uint64_t sequence = 0;
    Copy copy;
  };
  std::optional<Made> latest_;                  // GUARDED_BY(mu_)
  // Copies still due of a batch already made (a hedge's loser, a rejoin's check):
  // {sequence, source} -> the first copy.
  std::map<std::pair<uint64_t, int>, Copy> losers_;  // GUARDED_BY(mu_)
  std::vector<std::string> unrepeatable_;       // GUARDED_BY(mu_): determinism_problems()
  std::string unrepeatable_error_;              // GUARDED_BY(mu_): next() throws it (require_deterministic)
  // Compares a loser's copy with the winner's digest, recording a difference.
  void compare_copies(const data::Batch& copy, int source, const Copy& first);
  std::deque<double> latencies_;                // GUARDED_BY(mu_): seconds, the last 64 answers
  uint64_t hedged_ = 0;                         // GUARDED_BY(mu_)
  std::map<uint64_t, data::Batch> ready_;       // GUARDED_BY(mu_)
  uint64_t next_new_ = 0;                       // GUARDED_BY(mu_): next never-issued sequence
  int beyond_ = 0;                              // GUARDED_BY(mu_): sources' depths over their base, summed
  uint64_t next_deliver_ = 0;                   // GUARDED_BY(mu_)
  bool closed_ = false;                         // GUARDED_BY(mu_)
  std::chrono::steady_clock::duration waited_{};  // GUARDED_BY(mu_)
  std::deque<double> consumer_work_;            // GUARDED_BY(mu_): seconds, the last 32
  std::optional<Clock::time_point> returned_;   // GUARDED_BY(mu_): when next() last returned a batch
};

}  // namespace tandem::feed
