#include "tandem/report/summary_reader.h"

#include <cmath>

namespace tandem::report {
namespace {

double number(const nlohmann::json& j, const char* key) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

std::string text(const nlohmann::json& j, const char* key) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

bool flag(const nlohmann::json& j, const char* key) {
  const auto it = j.is_object() ? j.find(key) : j.end();
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

const nlohmann::json& member(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNone;
  const auto it = j.is_object() ? j.find(key) : j.end();
  return it == j.end() ? kNone : *it;
}

SourceSummary source_of(const nlohmann::json& j) {
  SourceSummary s;
  s.address = text(j, "address");
  s.failed = flag(j, "failed");
  s.error = s.failed ? text(j, "error") : "";
  s.batches = number(j, "batches");
  s.samples = number(j, "samples");
  s.images_per_sec = number(j, "images_per_sec");
  s.share = number(j, "share");
  s.compute_seconds = number(j, "compute_seconds");
  s.rejoins = number(j, "rejoins");
  return s;
}

std::optional<StepSeconds> step_seconds_of(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  return StepSeconds{number(j, "data_wait"), number(j, "host_to_device"), number(j, "forward_backward"),
                     number(j, "communication"), number(j, "optimizer"), number(j, "script")};
}

}  // namespace

SummaryView read_summary(const nlohmann::json& s) {
  SummaryView v;
  if (!s.is_object()) return v;
  v.model = text(s, "model");
  v.device = text(s, "device");
  v.model_file = text(s, "model_file");
  v.steps = number(s, "steps");
  v.epochs = number(s, "epochs");
  v.first_loss = number(s, "first_loss");
  v.final_loss = number(s, "final_loss");
  v.eval_accuracy = number(s, "eval_accuracy");
  v.wall_seconds = number(s, "wall_seconds");
  v.data_wait_fraction = number(s, "data_wait_fraction");
  v.samples_per_sec = number(s, "samples_per_sec");
  v.world_size = number(s, "world_size");
  v.batch_size = number(s, "batch_size");
  v.global_batch = number(s, "global_batch");
  const nlohmann::json& tp = member(s, "throughput");
  v.global_samples_per_sec = number(tp, "global_samples_per_sec");
  v.per_rank_samples_per_sec = number(tp, "per_rank_samples_per_sec");
  v.ceiling_samples_per_sec = number(tp, "ceiling_samples_per_sec");
  v.interrupted = flag(s, "interrupted");
  if (member(s, "failure").is_string()) v.failure = text(s, "failure");
  v.exit_code = number(s, "exit_code");
  const nlohmann::json& workers = member(s, "workers");
  if (workers.is_array()) {
    for (const nlohmann::json& w : workers) v.sources.push_back(source_of(w));
  }
  v.step_seconds = step_seconds_of(member(s, "step_seconds"));
  if (member(s, "settings").is_object()) v.settings = member(s, "settings");
  v.plan_inputs = plan::read_plan_inputs(s);
  return v;
}

double global_rate(const SummaryView& s) {
  if (std::isfinite(s.global_samples_per_sec)) return s.global_samples_per_sec;
  return s.samples_per_sec * (std::isfinite(s.world_size) ? s.world_size : 1.0);
}

}  // namespace tandem::report
