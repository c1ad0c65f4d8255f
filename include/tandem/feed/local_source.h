// Preprocessing on the trainer host's own spare cores, in-process: no gRPC hop.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "tandem/data/batching/batch_maker.h"
#include "tandem/feed/scheduler.h"

namespace tandem::feed {

class LocalSource {
 public:
  // Starts `threads` threads, each building whole batches. REQUIRES: threads >= 1.
  LocalSource(Scheduler& scheduler, std::shared_ptr<const data::Dataset> dataset, int threads,
              data::DType wire = data::DType::kFloat32);
  // REQUIRES: scheduler.close() was called or every batch was delivered.
  ~LocalSource();
  LocalSource(const LocalSource&) = delete;
  LocalSource& operator=(const LocalSource&) = delete;

 private:
  void run();

  Scheduler& scheduler_;
  data::BatchMaker maker_;
  int id_;
  std::vector<std::thread> threads_;
};

}  // namespace tandem::feed
