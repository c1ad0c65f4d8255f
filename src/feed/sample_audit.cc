#include "tandem/feed/sample_audit.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_set>

#include <fmt/format.h>

namespace tandem::feed {

SampleAudit::SampleAudit(const data::Sampler& plan, const data::DataPosition& from) : plan_(plan), from_(from) {}

// An epoch's counts, its samples before `from_` marked as trained by the earlier runs.
SampleAudit::Epoch& SampleAudit::epoch(uint32_t number) {
  Epoch& e = epochs_[number];
  if (!e.times.empty()) return e;
  const std::vector<uint64_t> order = plan_.order(number);
  e.times.assign(order.size(), 0);
  const uint64_t before = number < from_.epoch ? from_.epoch_samples : number == from_.epoch ? from_.sample : 0;
  for (uint64_t p = 0; p < std::min<uint64_t>(before, order.size()); ++p) e.times[order[p]] = 1;
  return e;
}

void SampleAudit::record(const data::Batch& batch) {
  if (held_) count(*held_);
  held_ = Taken{batch.epoch, batch.sequence, batch.indices};
}

void SampleAudit::finish(uint64_t trained_to) {
  if (held_ && held_->sequence < trained_to) count(*held_);
  held_.reset();
}

void SampleAudit::count(const Taken& batch) {
  Epoch& e = epoch(batch.epoch);
  e.first_sequence = std::min(e.first_sequence, batch.sequence);
  e.last_sequence = std::max(e.last_sequence, batch.sequence);
  const data::BatchRequest planned = plan_.request(batch.sequence);
  const std::unordered_set<uint64_t> expected(planned.indices.begin(), planned.indices.end());
  for (const uint64_t i : batch.indices) {
    ++e.consumed;
    if (!expected.count(i) || i >= e.times.size()) {
      ++e.unplanned;
      continue;
    }
    if (e.times[i] > 0) ++e.duplicated;
    if (e.times[i] < 255) ++e.times[i];
  }
}

// One epoch: this rank's positions from `from_` (or the epoch's start) to its last
// consumed batch (or the epoch's end), and which of them no run consumed.
nlohmann::json SampleAudit::epoch_report(uint32_t number, const Epoch& e, uint32_t last_epoch,
                                         uint64_t last_sequence) const {
  const uint64_t start = number < from_.epoch ? plan_.epoch_end(number) : number == from_.epoch ? from_.sample : 0;
  const data::DataPosition after_last = plan_.position(last_sequence + 1);
  const uint64_t end = number < last_epoch || after_last.epoch > number ? plan_.epoch_end(number) : after_last.sample;
  const std::vector<uint64_t> order = plan_.order(number);
  uint64_t planned = 0, missing = 0;
  for (uint64_t p = start; p < end; ++p) {
    if (plan_.rank_of(number, p) != plan_.rank()) continue;
    ++planned;
    if (e.times.empty() || e.times[order[p]] == 0) ++missing;
  }
  const bool any = e.first_sequence != UINT64_MAX;
  const uint64_t dropped = number == plan_.anchor().epoch && plan_.rank() == 0 ? plan_.anchor_tail() : 0;
  return {{"epoch", number},
          {"dropped", dropped},
          {"first_batch", any ? nlohmann::json(e.first_sequence) : nlohmann::json()},
          {"last_batch", any ? nlohmann::json(e.last_sequence) : nlohmann::json()},
          {"planned", planned},
          {"consumed", e.consumed},
          {"missing", missing},
          {"duplicated", e.duplicated},
          {"unplanned", e.unplanned}};
}

nlohmann::json SampleAudit::report() const {
  static const char* kCounts[] = {"planned", "consumed", "missing", "duplicated", "unplanned", "dropped"};
  nlohmann::json out = {{"from", position_json(from_)}, {"epochs", nlohmann::json::array()}};
  for (const char* k : kCounts) out[k] = uint64_t{0};
  if (epochs_.empty()) return out;
  const uint32_t last_epoch = epochs_.rbegin()->first;
  const uint64_t last_sequence = epochs_.rbegin()->second.last_sequence;
  std::set<uint32_t> numbers;
  for (const auto& [n, e] : epochs_) numbers.insert(n);
  for (uint32_t n = from_.epoch; n <= last_epoch; ++n) numbers.insert(n);  // one this run skipped whole, too
  const Epoch none;
  for (const uint32_t n : numbers) {
    const auto it = epochs_.find(n);
    nlohmann::json e = epoch_report(n, it == epochs_.end() ? none : it->second, last_epoch, last_sequence);
    for (const char* k : kCounts) out[k] = out[k].get<uint64_t>() + e[k].get<uint64_t>();
    out["epochs"].push_back(std::move(e));
  }
  return out;
}

nlohmann::json SampleAudit::merge(const std::vector<nlohmann::json>& reports) {
  static const char* kCounts[] = {"planned", "consumed", "missing", "duplicated", "unplanned", "dropped"};
  nlohmann::json out = {{"ranks", reports.size()}};
  if (!reports.empty() && reports[0].contains("from")) out["from"] = reports[0]["from"];
  for (const char* k : kCounts) out[k] = uint64_t{0};
  std::map<uint64_t, nlohmann::json> epochs;
  auto bound = [](const nlohmann::json& a, const nlohmann::json& b, bool low) {
    if (!a.is_number()) return b;
    if (!b.is_number()) return a;
    return nlohmann::json(low ? std::min(a.get<uint64_t>(), b.get<uint64_t>()) : std::max(a.get<uint64_t>(), b.get<uint64_t>()));
  };
  for (const nlohmann::json& r : reports) {
    for (const char* k : kCounts) out[k] = out[k].get<uint64_t>() + r.value(k, uint64_t{0});
    for (const nlohmann::json& e : r.at("epochs")) {
      nlohmann::json& m = epochs[e.at("epoch").get<uint64_t>()];
      if (m.is_null()) {
        m = e;
        continue;
      }
      for (const char* k : kCounts) m[k] = m.value(k, uint64_t{0}) + e.value(k, uint64_t{0});
      m["first_batch"] = bound(m["first_batch"], e.at("first_batch"), true);
      m["last_batch"] = bound(m["last_batch"], e.at("last_batch"), false);
    }
  }
  out["epochs"] = nlohmann::json::array();
  for (auto& [epoch, e] : epochs) out["epochs"].push_back(std::move(e));
  return out;
}

nlohmann::json position_json(const data::DataPosition& p) {
  return {{"epoch", p.epoch},         {"sample", p.sample},
          {"world", p.world},         {"batch_size", p.batch_size},
          {"dataset_size", p.dataset_size}, {"epoch_samples", p.epoch_samples}};
}

std::optional<data::DataPosition> position_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  for (const char* k : {"epoch", "sample", "world", "batch_size", "dataset_size", "epoch_samples"}) {
    if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() < 0 || j[k].get<uint64_t>() > (uint64_t{1} << 40)) {
      return std::nullopt;
    }
  }
  data::DataPosition p;
  p.epoch = j["epoch"].get<uint32_t>();
  p.sample = j["sample"].get<uint64_t>();
  p.world = j["world"].get<int>();
  p.batch_size = j["batch_size"].get<int>();
  p.dataset_size = j["dataset_size"].get<uint64_t>();
  p.epoch_samples = j["epoch_samples"].get<uint64_t>();
  if (p.world < 1 || p.batch_size < 1 || p.world > (1 << 20) || p.batch_size > (1 << 24)) return std::nullopt;
  return p;
}

namespace {

std::string geometry(const data::DataPosition& p) {
  return fmt::format("{} rank{} x {} (global batch {})", p.world, p.world == 1 ? "" : "s", p.batch_size,
                     static_cast<uint64_t>(p.world) * static_cast<uint64_t>(p.batch_size));
}

}  // namespace

std::string resume_shift(const data::DataPosition& from, const data::DataPosition& to) {
  if (from.world == to.world && from.batch_size == to.batch_size) return "";
  const uint64_t tail = data::anchor_tail(to.dataset_size, to.batch_size, to.world, data::anchor_at(0, from));
  const uint64_t was = static_cast<uint64_t>(from.world) * static_cast<uint64_t>(from.batch_size);
  const uint64_t now = static_cast<uint64_t>(to.world) * static_cast<uint64_t>(to.batch_size);
  const std::string dropped =
      tail == 0 ? ""
                : fmt::format(" (its last {} samples, fewer than one global batch of {}, are the epoch's dropped tail, "
                              "as every epoch's remainder)", tail, now);
  const std::string batch =
      was == now ? "the global batch is the same"
                 : fmt::format("the global batch is {}, not {}: the learning rate stays as given (--lr, or the script's: tandem does not scale it; a "
                               "recipe that ties it to the global batch scales it x{:.3g} by the linear rule) and "
                               "a step is now {} samples", now, was, static_cast<double>(now) / static_cast<double>(was), now);
  return fmt::format("it was written by {} at epoch {}, sample {}; this run's {} continues epoch {}'s order from sample "
                     "{} exactly{}; {}",
                     geometry(from), from.epoch, from.sample, geometry(to), from.epoch, from.sample, dropped, batch);
}

}  // namespace tandem::feed
