// A data worker with no network, for tests of the feed's policy (WorkerLink, RankFeed):
// a transport::WorkerClient whose health, description and streams a test scripts. Each
// stream serves real batches of `dataset` (made in the test's process) and ends the way
// the next scripted StreamPlan says.
#pragma once

#include <chrono>
#include <thread>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "tandem/common/error.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/transport/worker_client.h"

namespace tandem::testing {

// How one stream ends: after `batches` answers, with `end` (a broken stream), or, with
// no limit, when its client has written its last request and every answer was read.
struct StreamPlan {
  std::optional<int> batches;
  transport::CallStatus end;
};

// What the fake worker is, shared by its client and the test (all under one lock).
struct FakeWorkerState {
  std::mutex mu;
  std::condition_variable cv;
  bool healthy = true;
  bool silent = false;  // a health check waits out its deadline, then fails (an address nobody answers at)
  transport::WorkerInfo info;
  std::deque<StreamPlan> plans;  // one per stream opened; empty = serve normally
  int streams = 0;               // streams opened
  int health_checks = 0;
  int info_calls = 0;
  int shutdowns = 0;
};

class FakeBatchCall : public transport::BatchCall {
 public:
  FakeBatchCall(std::shared_ptr<FakeWorkerState> state, std::shared_ptr<const data::Dataset> dataset, StreamPlan plan)
      : state_(std::move(state)), maker_(std::move(dataset), nullptr), plan_(std::move(plan)) {}
  bool write(const data::BatchRequest& request) override {
    std::lock_guard lock(mu_);
    if (ended_) return false;
    pending_.push_back(request);
    cv_.notify_all();
    return true;
  }
  void writes_done() override {
    std::lock_guard lock(mu_);
    writes_done_ = true;
    cv_.notify_all();
  }
  std::optional<data::Batch> read() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return ended_ || !pending_.empty() || writes_done_; });
    if (ended_ || pending_.empty()) return end_here();
    if (plan_.batches && served_ == *plan_.batches) {
      status_ = plan_.end;
      return end_here();
    }
    const data::BatchRequest r = pending_.front();
    pending_.pop_front();
    ++served_;
    lock.unlock();
    return maker_.make(r);
  }
  void cancel() override {
    std::lock_guard lock(mu_);
    if (!ended_ && status_.ok()) status_ = {transport::CallStatus::Kind::kTransient, "gRPC CANCELLED: cancelled"};
    ended_ = true;
    cv_.notify_all();
  }
  transport::CallStatus finish() override {
    std::lock_guard lock(mu_);
    return status_;
  }

 private:
  std::optional<data::Batch> end_here() {
    ended_ = true;
    cv_.notify_all();
    return std::nullopt;
  }
  std::shared_ptr<FakeWorkerState> state_;
  data::BatchMaker maker_;
  StreamPlan plan_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<data::BatchRequest> pending_;
  bool writes_done_ = false;
  bool ended_ = false;
  int served_ = 0;
  transport::CallStatus status_;
};

class FakeWorkerClient : public transport::WorkerClient {
 public:
  FakeWorkerClient(std::string target, std::shared_ptr<FakeWorkerState> state,
                   std::shared_ptr<const data::Dataset> dataset)
      : target_(std::move(target)), state_(std::move(state)), dataset_(std::move(dataset)) {}
  const std::string& target() const override { return target_; }
  bool healthy(double deadline_s, std::string* why) override {
    bool silent = false;
    {
      std::lock_guard lock(state_->mu);
      silent = state_->silent;
    }
    if (silent) {
      std::this_thread::sleep_for(std::chrono::duration<double>(deadline_s));
      if (why) *why = "gRPC DEADLINE_EXCEEDED";
      return false;
    }
    std::lock_guard lock(state_->mu);
    ++state_->health_checks;
    if (!state_->healthy && why) *why = "gRPC UNAVAILABLE: connection refused";
    return state_->healthy;
  }
  transport::WorkerInfo info(double) override {
    std::lock_guard lock(state_->mu);
    ++state_->info_calls;
    if (!state_->healthy) throw NetworkError("asking data worker " + target_ + " what it serves: gRPC UNAVAILABLE");
    return state_->info;
  }
  transport::CallStatus shutdown(const std::string&, double) override {
    std::lock_guard lock(state_->mu);
    ++state_->shutdowns;
    return {};
  }
  std::unique_ptr<transport::BatchCall> stream() override {
    std::lock_guard lock(state_->mu);
    ++state_->streams;
    StreamPlan plan;
    if (!state_->plans.empty()) {
      plan = state_->plans.front();
      state_->plans.pop_front();
    }
    state_->cv.notify_all();
    return std::make_unique<FakeBatchCall>(state_, dataset_, plan);
  }

 private:
  std::string target_;
  std::shared_ptr<FakeWorkerState> state_;
  std::shared_ptr<const data::Dataset> dataset_;
};

// A worker's description of `dataset`, as its Info would give it.
inline transport::WorkerInfo describe(const data::Dataset& dataset, const std::string& host = "fake") {
  transport::WorkerInfo w;
  w.dataset = dataset.info();
  w.threads = 1;
  w.host = host;
  return w;
}

}  // namespace tandem::testing
