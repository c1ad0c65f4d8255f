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
  const data::DataPosition here = plan_.position(0);
  const uint64_t global = static_cast<uint64_t>(here.batch_size) * static_cast<uint64_t>(here.world);
  const uint64_t start = number < from_.epoch ? here.epoch_samples : number == from_.epoch ? from_.sample : 0;
  const uint64_t end =
      number < last_epoch ? here.epoch_samples : (last_sequence % plan_.batches_per_epoch() + 1) * global;
  const std::vector<uint64_t> order = plan_.order(number);
  uint64_t planned = 0, missing = 0;
  for (uint64_t p = start; p < end; ++p) {
    if (static_cast<int>((p % global) / static_cast<uint64_t>(here.batch_size)) != plan_.rank()) continue;
    ++planned;
    if (e.times.empty() || e.times[order[p]] == 0) ++missing;
  }
  const bool any = e.first_sequence != UINT64_MAX;
  return {{"epoch", number},
          {"first_batch", any ? nlohmann::json(e.first_sequence) : nlohmann::json()},
          {"last_batch", any ? nlohmann::json(e.last_sequence) : nlohmann::json()},
          {"planned", planned},
          {"consumed", e.consumed},
          {"missing", missing},
          {"duplicated", e.duplicated},
          {"unplanned", e.unplanned}};
}

nlohmann::json SampleAudit::report() const {
  static const char* kCounts[] = {"planned", "consumed", "missing", "duplicated", "unplanned"};
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
  static const char* kCounts[] = {"planned", "consumed", "missing", "duplicated", "unplanned"};
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
    for (const char* k : kCounts) out[k] = out[k].get<uint64_t>() + r.at(k).get<uint64_t>();
    for (const nlohmann::json& e : r.at("epochs")) {
      nlohmann::json& m = epochs[e.at("epoch").get<uint64_t>()];
      if (m.is_null()) {
        m = e;
        continue;
      }
      for (const char* k : kCounts) m[k] = m[k].get<uint64_t>() + e.at(k).get<uint64_t>();
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

// Positions from `a` up to (not including) `b`, counted in an epoch of `per_epoch`.
uint64_t span(const data::DataPosition& a, const data::DataPosition& b, uint64_t per_epoch) {
  if (a.epoch == b.epoch) return b.sample - a.sample;
  return (per_epoch > a.sample ? per_epoch - a.sample : 0) + (b.epoch - a.epoch - 1) * per_epoch + b.sample;
}

}  // namespace

std::string resume_shift(const data::DataPosition& from, const data::DataPosition& to) {
  if (from.epoch == to.epoch && from.sample == to.sample) return "";
  const bool skips = std::tie(to.epoch, to.sample) > std::tie(from.epoch, from.sample);
  const data::DataPosition& lo = skips ? from : to;
  const data::DataPosition& hi = skips ? to : from;
  const uint64_t n = span(lo, hi, to.epoch_samples);
  const std::string which =
      lo.epoch == hi.epoch
          ? fmt::format("samples {}-{} of epoch {}'s order ({})", lo.sample, hi.sample - 1, lo.epoch, n)
          : fmt::format("the samples from position {} of epoch {} up to position {} of epoch {} of their order ({})",
                        lo.sample, lo.epoch, hi.sample, hi.epoch, n);
  return fmt::format("it was written by {} at epoch {}, sample {}; this run's {} starts its step at epoch {}, sample "
                     "{}, so {} {}. tandem does not resume exactly at another world size yet: resume on {} to train "
                     "every sample once (--audit-samples counts them)",
                     geometry(from), from.epoch, from.sample, geometry(to), to.epoch, to.sample, which,
                     skips ? "are skipped, never trained" : "are trained again", geometry(from));
}

}  // namespace tandem::feed
