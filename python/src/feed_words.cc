#include "feed_words.h"

#include <filesystem>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/feed/sample_audit.h"
#include "tandem/report/output_root.h"

namespace tandem::python {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string numpy_dtype(data::DType d) {
  switch (d) {
    case data::DType::kUInt8: return "uint8";
    case data::DType::kFloat32: return "float32";
    case data::DType::kFloat16: return "float16";
    case data::DType::kInt32: return "int32";
    case data::DType::kInt64: return "int64";
    case data::DType::kBFloat16: break;
  }
  throw ConfigError("wire_dtype bfloat16 has no numpy dtype: use float32, float16 or uint8 with tandem.Feed");
}

// The request's settings, [[key, [values]], ...], as feed_settings takes them.
std::vector<Setting> settings_of(const json& request) {
  std::vector<Setting> out;
  if (!request.contains("settings")) return out;
  for (const json& kv : request.at("settings")) {
    out.push_back({kv.at(0).get<std::string>(), kv.at(1).get<std::vector<std::string>>()});
  }
  return out;
}

// Whether the request's settings, or the launcher's (TANDEM_SETTINGS), name a dataset.
std::optional<data::DataPosition> resume_of(const json& request) {
  if (!request.contains("state") || request["state"].is_null()) return std::nullopt;
  const json& state = request["state"];
  const std::optional<data::DataPosition> at =
      state.is_object() ? feed::position_from_json(state.value("data", json())) : std::nullopt;
  if (!at || !state.contains("step") || !state["step"].is_number_unsigned()) {
    throw ConfigError("state= (or load_state_dict) is not a tandem feed's state_dict(): it needs the 'step' and "
                      "'data' that state_dict() returns; pass what state_dict() gave, unchanged");
  }
  return at;
}

json feed_state(uint64_t step, const data::DataPosition& at, const std::string& fingerprint) {
  return {{"version", 1}, {"step", step}, {"data", feed::position_json(at)}, {"fingerprint", fingerprint}};
}

uint64_t start_step_of(const json& request) {
  const uint64_t start = request.value("start_step", uint64_t{0});
  if (!resume_of(request)) return start;
  if (start != 0) {
    throw ConfigError("start_step and state are both given: the state's step is where it resumes; give one");
  }
  return request["state"]["step"].get<uint64_t>();
}

bool names_data(const json& request) {
  const std::vector<Setting> all = with_launcher_settings(settings_of(request));
  return std::any_of(all.begin(), all.end(), [](const Setting& s) { return s.key == "data"; });
}

namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

// The dataset as Python sees it. Class names travel as hex (folder names need not be
// UTF-8: Python decodes them with surrogateescape, as os.listdir does).
json dataset_json(const data::DatasetInfo& i, const std::string& given, bool normalized) {
  const std::string dtype = normalized ? "float32" : given;
  json fields = json::array();
  for (const data::FieldSpec& f : i.schema()) {
    fields.push_back({{"name", f.name},
                      {"dtype", f.name == data::kImageField ? dtype : numpy_dtype(f.dtype)},
                      {"shape", f.shape},
                      {"ragged", f.ragged()}});
  }
  json names = json::array();
  for (const std::string& n : i.class_names) names.push_back(hex(n));
  return {{"name", i.name},     {"size", i.size},         {"sample_shape", i.sample_shape},
          {"num_classes", i.num_classes}, {"class_names_hex", names}, {"dtype", dtype},
          {"mean", i.mean},     {"std", i.std},           {"fingerprint", i.fingerprint},
          {"fields", fields},   {"normalized", normalized}};
}

namespace {

// One array of a batch as Python reads it (describe()). A batch as Python reads it, in one line of text split by tabs (this is per batch: JSON
// costs more than the rest of the hand-over): sequence, epoch, source, the indices'
// address and count, then per array name, dtype, shape (comma-separated), address,
// bytes, lengths address, lengths count. Field names are the schema's identifiers and a
// source is a host:port or "local": neither holds a tab.
void describe_array(std::string& out, const std::string& name, const std::string& dtype,
                    const std::vector<int64_t>& shape, const void* data, size_t bytes,
                    const std::vector<int64_t>* lengths = nullptr) {
  fmt::format_to(std::back_inserter(out), "\t{}\t{}\t{}\t{}\t{}\t{}\t{}", name, dtype, fmt::join(shape, ","),
                 reinterpret_cast<uintptr_t>(data), bytes, lengths ? reinterpret_cast<uintptr_t>(lengths->data()) : 0,
                 lengths ? lengths->size() : 0);
}

}  // namespace

std::string describe(const data::Batch& b, const std::string& source) {
  std::string out = fmt::format("{}\t{}\t{}\t{}\t{}", b.sequence, b.epoch, source,
                                reinterpret_cast<uintptr_t>(b.indices.data()), b.indices.size());
  if (b.shape.size() > 1) {  // [N] alone: the dataset has no image
    describe_array(out, data::kImageField, numpy_dtype(b.dtype), b.shape, b.data.data(), b.data.size());
  }
  const std::vector<int64_t> n{b.size()};
  if (!b.labels.empty()) {
    describe_array(out, data::kLabelField, "int64", n, b.labels.data(), b.labels.size() * sizeof(int64_t));
  }
  for (const data::Field& f : b.fields) {
    describe_array(out, f.name, numpy_dtype(f.dtype), f.shape, f.data.data(), f.data.size(),
                   f.lengths.empty() ? nullptr : &f.lengths);
  }
  return out;
}

std::string script_summary_path(const Settings& settings) {
  if (!settings.trainer.summary_json.empty()) return settings.trainer.summary_json;
  std::error_code ec;
  const std::string& root = settings.cluster.sagemaker_root;
  return std::filesystem::is_directory(root, ec) ? root + "/output/data/summary.json" : "";
}

// The process's run records (feed::ScriptRun), made by its first feed on rank 0: the
// feeds of one script (one per epoch) add up to one run. A feed told to write elsewhere
// (another sagemaker_root or summary_json) starts another. They go only where the feed is
// told: beside summary_json, or under an existing SageMaker root (SageMaker, tandem
// launch, simulate); never into whatever folder the script runs in. Null without either,
// or when the output folder cannot be made.
std::shared_ptr<feed::ScriptRun> script_run(const Settings& settings, const FeedPlace& place,
                                              uint64_t steps_per_epoch, uint64_t start_step) {
  static std::mutex mu;
  static std::shared_ptr<feed::ScriptRun> run;
  static std::optional<std::string> made_for;  // where the run was asked to write
  std::lock_guard lock(mu);
  std::error_code ec;
  const std::string root = settings.cluster.sagemaker_root;
  const std::string wanted = settings.trainer.summary_json + "\n" + (std::filesystem::is_directory(root, ec) ? root : "");
  if (made_for == wanted) return run;
  made_for = wanted;
  run.reset();
  const std::string summary = script_summary_path(settings);
  if (summary.empty()) {
    spdlog::info("no run records (metrics.jsonl, summary.json, report.html): no SageMaker root at {}; pass "
                 "summary_json=PATH (or sagemaker_root=DIR) to keep them", root);
    return nullptr;
  }
  feed::ScriptRunOptions o{summary, start_step > 0, place.rank, place.world, settings.trainer.log_every,
                             steps_per_epoch};
  if (std::filesystem::is_directory(root, ec)) o.sagemaker_root = root;
  o.metrics_port = settings.cluster.metrics_port;
  if (!settings.cluster.metrics_bind.empty()) o.metrics_bind = settings.cluster.metrics_bind;
  if (place.world > 1) {
    o.ranks = [summary, world = place.world, local = place.local_world, launch = place.launch] {
      return feed::ranks_training(summary, world, local, launch);
    };
  }
  try {
    run = std::make_shared<feed::ScriptRun>(o);
    spdlog::info("this run's metrics.jsonl, summary.json and report.html go to {}",
                 std::filesystem::path(summary).parent_path().string());
  } catch (const std::exception& e) {
    spdlog::warn("no metrics or summary for this run: {}", e.what());
  }
  return run;
}

json stats_json(const feed::Feeder& f) {
  json sources = json::array();
  for (const auto& s : f.stats()) {
    sources.push_back({{"name", s.name},
                       {"batches", s.batches},
                       {"samples", s.samples},
                       {"compute_seconds", s.compute_seconds},
                       {"failed", s.failed},
                       {"error", s.error},
                       {"rejoins", s.rejoins}});
  }
  return {{"sources", sources}, {"hedged_requests", f.hedged()}};
}

}  // namespace tandem::python
