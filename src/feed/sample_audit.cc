#include "tandem/feed/sample_audit.h"

#include <algorithm>
#include <unordered_set>

namespace tandem::feed {

SampleAudit::SampleAudit(const data::Sampler& plan, uint64_t dataset_size)
    : plan_(plan), dataset_size_(dataset_size) {}

void SampleAudit::record(const data::Batch& batch) {
  Epoch& e = epochs_[batch.epoch];
  if (e.times.empty()) e.times.assign(dataset_size_, 0);
  e.first_sequence = std::min(e.first_sequence, batch.sequence);
  e.last_sequence = std::max(e.last_sequence, batch.sequence);
  const data::BatchRequest planned = plan_.request(batch.sequence);
  const std::unordered_set<uint64_t> expected(planned.indices.begin(), planned.indices.end());
  for (const uint64_t i : batch.indices) {
    ++e.consumed;
    if (!expected.count(i) || i >= dataset_size_) {
      ++e.unplanned;
      continue;
    }
    if (e.times[i] > 0) ++e.duplicated;
    if (e.times[i] < 255) ++e.times[i];
  }
}

nlohmann::json SampleAudit::report() const {
  nlohmann::json epochs = nlohmann::json::array();
  uint64_t planned_all = 0, consumed_all = 0, missing_all = 0, duplicated_all = 0, unplanned_all = 0;
  for (const auto& [epoch, e] : epochs_) {
    uint64_t planned = 0, missing = 0;
    for (uint64_t seq = e.first_sequence; seq <= e.last_sequence; ++seq) {
      for (const uint64_t i : plan_.request(seq).indices) {
        ++planned;
        if (e.times[i] == 0) ++missing;
      }
    }
    epochs.push_back({{"epoch", epoch},
                      {"first_batch", e.first_sequence},
                      {"last_batch", e.last_sequence},
                      {"planned", planned},
                      {"consumed", e.consumed},
                      {"missing", missing},
                      {"duplicated", e.duplicated},
                      {"unplanned", e.unplanned}});
    planned_all += planned;
    consumed_all += e.consumed;
    missing_all += missing;
    duplicated_all += e.duplicated;
    unplanned_all += e.unplanned;
  }
  return {{"planned", planned_all}, {"consumed", consumed_all}, {"missing", missing_all},
          {"duplicated", duplicated_all}, {"unplanned", unplanned_all}, {"epochs", epochs}};
}

nlohmann::json SampleAudit::merge(const std::vector<nlohmann::json>& reports) {
  static const char* kCounts[] = {"planned", "consumed", "missing", "duplicated", "unplanned"};
  nlohmann::json out = {{"ranks", reports.size()}};
  for (const char* k : kCounts) out[k] = uint64_t{0};
  std::map<uint64_t, nlohmann::json> epochs;
  for (const nlohmann::json& r : reports) {
    for (const char* k : kCounts) out[k] = out[k].get<uint64_t>() + r.at(k).get<uint64_t>();
    for (const nlohmann::json& e : r.at("epochs")) {
      nlohmann::json& m = epochs[e.at("epoch").get<uint64_t>()];
      if (m.is_null()) {
        m = e;
        continue;
      }
      for (const char* k : kCounts) m[k] = m[k].get<uint64_t>() + e.at(k).get<uint64_t>();
      m["first_batch"] = std::min(m["first_batch"].get<uint64_t>(), e.at("first_batch").get<uint64_t>());
      m["last_batch"] = std::max(m["last_batch"].get<uint64_t>(), e.at("last_batch").get<uint64_t>());
    }
  }
  out["epochs"] = nlohmann::json::array();
  for (auto& [epoch, e] : epochs) out["epochs"].push_back(std::move(e));
  return out;
}

}  // namespace tandem::feed
