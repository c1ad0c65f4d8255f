// Exactly-once you can check (--audit-samples): which samples the training loop consumed,
// against the sampler's plan. Every batch carries the indices it was made from (the
// worker echoes them), so a batch made from the wrong samples, a sequence delivered
// twice or one skipped after a worker failed all show up as unplanned, duplicated or
// missing samples.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/data/batching/sampler.h"
#include "tandem/data/core/batch.h"

namespace tandem::feed {

class SampleAudit {
 public:
  // REQUIRES: `plan` outlives the audit.
  SampleAudit(const data::Sampler& plan, uint64_t dataset_size);

  // A batch the training loop consumed.
  void record(const data::Batch& batch);

  // Per epoch: planned samples (of the sequences between the first and last consumed,
  // so a skipped sequence counts), consumed, missing, duplicated and unplanned, plus the
  // totals. All zeros but planned and consumed mean every sample exactly once.
  nlohmann::json report() const;

  // The reports of every rank as one: ranks' plans are disjoint slices of each global
  // batch, so their counts add up (a sample sent to the wrong rank counts as unplanned).
  static nlohmann::json merge(const std::vector<nlohmann::json>& reports);

 private:
  struct Epoch {
    std::vector<uint8_t> times;  // per sample: how often consumed (saturating)
    uint64_t first_sequence = UINT64_MAX, last_sequence = 0;
    uint64_t consumed = 0, duplicated = 0, unplanned = 0;
  };
  const data::Sampler& plan_;
  uint64_t dataset_size_;
  std::map<uint32_t, Epoch> epochs_;
};

}  // namespace tandem::feed
