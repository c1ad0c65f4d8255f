// What a data worker says about itself: the answer to the Info RPC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data/core/dataset_info.h"

namespace tandem::transport {

struct WorkerInfo {
  // What it serves, as the worker says: its `fields` are the schema (DatasetInfo::schema();
  // empty from an older worker: image and label). As sent; a trainer checks it
  // (data::info_problem) before it believes it.
  data::DatasetInfo dataset;
  int threads = 0;
  std::string host;
  std::vector<std::string> skipped;  // files it could not use (--on-bad-sample skip)
  uint64_t skipped_count = 0;
  std::string determinism_problem;  // data::Dataset::determinism_problem(); "" when deterministic
  std::string instance;  // random per worker process: one worker under two addresses has one
  // A pool's (--pool-jobs) account of the calling job: served, made for it, shared.
  struct PoolTally {
    uint64_t samples_served = 0, samples_made = 0, samples_shared = 0;
  };
  std::optional<PoolTally> pool;
};

}  // namespace tandem::transport
