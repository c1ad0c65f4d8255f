#include "tandem/feed/local_source.h"

#include <exception>

namespace tandem::feed {

LocalSource::LocalSource(Scheduler& scheduler, std::shared_ptr<const data::Dataset> dataset, int threads,
                         data::DType wire)
    : scheduler_(scheduler), maker_(std::move(dataset), nullptr, wire),
      id_(scheduler.add_source("local", threads)) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

LocalSource::~LocalSource() {
  for (auto& t : threads_) t.join();
}

void LocalSource::run() {
  while (auto request = scheduler_.acquire(id_)) {
    try {
      scheduler_.complete(id_, maker_.make(*request));
    } catch (const std::exception& e) {
      scheduler_.fail(id_, std::string("local preprocessing failed: ") + e.what());
      return;
    }
  }
}

}  // namespace tandem::feed
