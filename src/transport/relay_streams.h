// Internal to the transport: the two halves of a host's stream relay (stream_relay.h).
// A rank's stream through the relay (RankStream: what its worker answered, waiting to be
// written to it) and one stream to a worker shared by the ranks' streams (WorkerStream:
// renumbers their requests into it and routes each batch back to the rank that asked).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "batch_method.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/options.h"

namespace tandem::transport {

using RelayClock = std::chrono::steady_clock;

// One rank's stream through the relay: what its worker answered, waiting to be written.
struct RankStream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RelayedBatch> ready;     // GUARDED_BY(mu)
  std::optional<grpc::Status> ended;  // GUARDED_BY(mu): the worker's stream ended, so
  int pending = 0;                    // GUARDED_BY(mu): requests passed on, not answered
  bool requests_done = false;         // GUARDED_BY(mu): the rank sent its last request

  void put(RelayedBatch batch, bool answer) {
    {
      std::lock_guard lock(mu);
      ready.push_back(std::move(batch));
      if (answer) --pending;
    }
    cv.notify_all();
  }
  void end(const grpc::Status& status) {
    {
      std::lock_guard lock(mu);
      if (!ended) ended = status;
    }
    cv.notify_all();
  }
};

// One stream to one worker, shared by the streams of this host's ranks.
class WorkerStream {
 public:
  WorkerStream(std::shared_ptr<grpc::Channel> channel, const SecurityOptions& security, int job_ranks)
      : channel_(std::move(channel)) {
    authorise(ctx_, security);
    add_job_ranks(ctx_, job_ranks);
    rw_ = open_relayed(*channel_, ctx_);
    reader_ = std::thread([this] { read_batches(); });
  }
  ~WorkerStream() {
    ctx_.TryCancel();
    reader_.join();
  }

  // Adds a rank's stream; false once this stream has ended or is closing (open another).
  bool attach(const std::shared_ptr<RankStream>& rank) {
    std::lock_guard lock(mu_);
    if (ended_ || closing_) return false;
    ranks_.push_back(rank);
    idle_since_.reset();
    if (!leaving_.empty()) rank->put(leaving_notice_, false);
    return true;
  }

  // Drops a rank's stream and what it still waits for.
  void detach(const RankStream* rank) {
    std::lock_guard lock(mu_);
    std::erase_if(ranks_, [&](const auto& r) { return r.get() == rank; });
    std::erase_if(routes_, [&](const auto& route) { return route.second.rank.get() == rank; });
    if (ranks_.empty()) idle_since_ = RelayClock::now();
  }

  // Ends the stream (the worker answers what it holds, then ends it) when no rank's
  // stream has used it since `before`: ranks that restart their streams at once (a retry,
  // the next epoch's feed) find it still open. True when it closed it now.
  bool close_if_idle(RelayClock::time_point before) {
    {
      std::lock_guard lock(mu_);
      if (!ranks_.empty() || ended_ || closing_ || !idle_since_ || *idle_since_ > before) return false;
      closing_ = true;
    }
    std::lock_guard write(write_mu_);
    rw_->WritesDone();
    return true;
  }

  // Passes a rank's request on under a sequence number of this stream's own.
  bool send(const std::shared_ptr<RankStream>& rank, v1::BatchRequest request) {
    {
      std::lock_guard lock(mu_);
      if (ended_) return false;
      const uint64_t sequence = next_++;
      routes_[sequence] = {rank, request.sequence()};
      request.set_sequence(sequence);
      std::lock_guard ranks(rank->mu);
      ++rank->pending;
    }
    std::lock_guard write(write_mu_);
    return !closing() && rw_->Write(request);
  }

  bool closing() const {
    std::lock_guard lock(mu_);
    return closing_;
  }

  bool ended() const {
    std::lock_guard lock(mu_);
    return ended_;
  }

 private:
  struct Route {
    std::shared_ptr<RankStream> rank;
    uint64_t sequence = 0;  // the rank's own
  };

  void read_batches() {
    RelayedBatch batch;
    while (rw_->Read(&batch)) {
      if (!batch.header.leaving().empty() || !batch.header.error().empty()) {
        tell_all(std::move(batch));
      } else {
        answer(std::move(batch));
      }
      batch = RelayedBatch();
    }
    const grpc::Status status = rw_->Finish();
    std::vector<std::shared_ptr<RankStream>> ranks;
    {
      std::lock_guard lock(mu_);
      ended_ = true;
      ranks.swap(ranks_);
      routes_.clear();
    }
    for (const auto& rank : ranks) rank->end(status);
  }

  // A notice or an in-band refusal concerns every rank's stream.
  void tell_all(RelayedBatch batch) {
    std::lock_guard lock(mu_);
    if (!batch.header.leaving().empty()) leaving_notice_ = batch, leaving_ = batch.header.leaving();
    for (const auto& rank : ranks_) rank->put(batch, false);
  }

  void answer(RelayedBatch batch) {
    std::shared_ptr<RankStream> rank;
    {
      std::lock_guard lock(mu_);
      const auto it = routes_.find(batch.header.sequence());
      if (it == routes_.end()) return;  // its rank's stream ended: the rank asks again elsewhere
      rank = std::move(it->second.rank);
      batch.header.set_sequence(it->second.sequence);
      routes_.erase(it);
    }
    rank->put(std::move(batch), true);
  }

  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext ctx_;
  std::unique_ptr<RelayClientStream> rw_;
  std::mutex write_mu_;  // one Write (or WritesDone) at a time
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<RankStream>> ranks_;  // GUARDED_BY(mu_)
  std::map<uint64_t, Route> routes_;                // GUARDED_BY(mu_): by this stream's sequence
  uint64_t next_ = 0;                               // GUARDED_BY(mu_)
  bool ended_ = false;                              // GUARDED_BY(mu_)
  bool closing_ = false;                            // GUARDED_BY(mu_)
  std::optional<RelayClock::time_point> idle_since_;     // GUARDED_BY(mu_): without ranks since
  std::string leaving_;                             // GUARDED_BY(mu_): the worker said it leaves
  RelayedBatch leaving_notice_;                     // GUARDED_BY(mu_)
  std::thread reader_;
};

}  // namespace tandem::transport
