// Exactly-once you can check (--audit-samples): which samples the training loop consumed,
// against the sampler's plan. Every batch carries the indices it was made from (the
// worker echoes them), so a batch made from the wrong samples, a sequence delivered
// twice or one skipped after a worker failed all show up as unplanned, duplicated or
// missing samples.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/data/batching/sampler.h"
#include "tandem/data/core/batch.h"

namespace tandem::feed {

class SampleAudit {
 public:
  // REQUIRES: `plan` outlives the audit. `from`: where the run started in the data: the
  // position a checkpoint it resumed from records (an earlier run's, maybe at another
  // world size), else plan.position(its first step). The audit plans by position from
  // there, and counts the samples before it as trained already, so a resume that skips
  // samples reports them missing and one that repeats them reports them duplicated.
  SampleAudit(const data::Sampler& plan, const data::DataPosition& from);

  // A batch the training loop took. It counts once the next is taken, or at finish()
  // when its step was trained: a step that a stop (SIGTERM) cut short never trained its
  // batch, and the resumed run trains it.
  void record(const data::Batch& batch);
  // The run trained every step before `trained_to` (start step + steps taken): the last
  // batch taken counts when it is among them.
  void finish(uint64_t trained_to);

  // Per epoch: planned samples (this rank's positions from `from` to its last consumed
  // batch, so a skipped sequence counts), consumed, missing, duplicated and unplanned,
  // plus the totals; and dropped (rank 0, the anchor's epoch: its remainder of fewer than
  // one global batch after a resume at another geometry, Sampler::anchor_tail). All zeros
  // but planned and consumed mean every sample exactly once.
  nlohmann::json report() const;

  // The reports of every rank as one: ranks' plans are disjoint slices of each global
  // batch, so their counts add up (a sample sent to the wrong rank counts as unplanned).
  static nlohmann::json merge(const std::vector<nlohmann::json>& reports);

 private:
  struct Taken {
    uint32_t epoch;
    uint64_t sequence;
    std::vector<uint64_t> indices;
  };
  void count(const Taken& t);
  std::optional<Taken> held_;  // the last batch taken, until it is known to be trained

  struct Epoch {
    std::vector<uint8_t> times;  // per sample: how often consumed (saturating), earlier runs' too
    uint64_t first_sequence = UINT64_MAX, last_sequence = 0;
    uint64_t consumed = 0, duplicated = 0, unplanned = 0;
  };
  Epoch& epoch(uint32_t e);
  nlohmann::json epoch_report(uint32_t number, const Epoch& e, uint32_t last_epoch, uint64_t last_sequence) const;

  const data::Sampler& plan_;
  const data::DataPosition from_;
  std::map<uint32_t, Epoch> epochs_;
};

// A position as a checkpoint's sidecar keeps it ("data"), and read back (nullopt: a
// sidecar from before tandem kept it, or not one).
nlohmann::json position_json(const data::DataPosition& p);
std::optional<data::DataPosition> position_from_json(const nlohmann::json& j);

// A resume whose checkpoint was written at `from` by a run of another geometry (world
// size or batch size; `to`: this run's, its position at its first step): one line naming
// both, the place it continues from, the anchor epoch's dropped tail, and what becomes of
// the global batch and the learning rate; "" when the geometry is the same.
std::string resume_shift(const data::DataPosition& from, const data::DataPosition& to);

}  // namespace tandem::feed
