// Internal to worker_server.cc: a pool's open streams by job.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <grpcpp/server_context.h>

namespace tandem::transport {

// A pool's open streams by job (every stream outside a pool is job ""), so that a job's
// release ends its own streams and no other's.
class JobStreams {
 public:
  using Ended = std::function<void(const std::string&)>;
  // Holds `ctx` as one of `job`'s streams for its scope; `ended` runs when it was the last.
  class Held {
   public:
    Held(JobStreams& s, std::string job, grpc::ServerContext* ctx, Ended ended)
        : s_(s), job_(std::move(job)), ctx_(ctx), ended_(std::move(ended)) {
      std::lock_guard lock(s_.mu_);
      s_.streams_[job_].insert(ctx_);
    }
    ~Held() {
      bool last = false;
      {
        std::lock_guard lock(s_.mu_);
        auto& mine = s_.streams_[job_];
        mine.erase(ctx_);
        last = mine.empty();
        if (last) s_.streams_.erase(job_);
      }
      if (last && ended_) ended_(job_);
    }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;

   private:
    JobStreams& s_;
    const std::string job_;
    grpc::ServerContext* const ctx_;
    const Ended ended_;
  };

  // Cancels every open stream of `job`; returns how many.
  size_t cancel(const std::string& job) {
    std::lock_guard lock(mu_);
    const auto it = streams_.find(job);
    if (it == streams_.end()) return 0;
    for (grpc::ServerContext* ctx : it->second) ctx->TryCancel();
    return it->second.size();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::set<grpc::ServerContext*>> streams_;  // GUARDED_BY(mu_)
};

}  // namespace tandem::transport
