#include "tandem/feed/local_source.h"

#include <exception>

#include "tandem/common/error.h"

namespace tandem::feed {

LocalSource::LocalSource(Scheduler& scheduler, std::shared_ptr<const data::Dataset> dataset, int threads,
                         data::DType wire)
    : scheduler_(scheduler), maker_(std::move(dataset), nullptr, wire),
      id_(scheduler.add_source(kLocalSource, maker_.dataset().read_ahead_bytes() > 0 ? 2 * threads : threads)) {
  const bool ahead = maker_.dataset().read_ahead_bytes() > 0;
  if (ahead) threads_.emplace_back([this] { dispatch(); });
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, ahead] { ahead ? make_ahead() : run(); });
}

LocalSource::~LocalSource() {
  for (auto& t : threads_) t.join();
}

void LocalSource::make(const data::BatchRequest& request, data::SampleReads* reads) {
  try {
    scheduler_.complete(id_, maker_.make(request, reads));
  } catch (const std::exception& e) {
    scheduler_.fail(id_, std::string("local preprocessing failed: ") + e.what(), /*may_return=*/false,
                    /*bad_data=*/dynamic_cast<const DataError*>(&e) != nullptr);
    std::lock_guard lock(mu_);
    ended_ = true;
    cv_.notify_all();
  }
}

void LocalSource::run() {
  while (auto request = scheduler_.acquire(id_)) {
    make(*request, nullptr);
    std::lock_guard lock(mu_);
    if (ended_) return;
  }
}

void LocalSource::dispatch() {
  while (auto request = scheduler_.acquire(id_)) {
    auto reads = maker_.read_ahead(*request);  // the files are fetched while earlier batches are made
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(*request), std::move(reads)});
    cv_.notify_one();
  }
  // Closed, finished or failed: what is queued is no longer needed.
  std::deque<Ahead> dropped;
  {
    std::lock_guard lock(mu_);
    ended_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
}

void LocalSource::make_ahead() {
  for (;;) {
    Ahead next;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return ended_ || !queue_.empty(); });
      if (ended_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    make(next.request, next.reads.get());
  }
}

}  // namespace tandem::feed
