// Internal to libtandem_feed.so (capi.cc): what the C ABI reads and says about feeds.
// Requests come in as JSON; datasets, plans and stats go out as JSON; a batch goes out
// as one tab-separated line (describe()) that python/tandem/_tandem.py parses.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "feed_env.h"
#include "feed_settings.h"
#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"
#include "tandem/feed/feeder.h"
#include "tandem/feed/script_run.h"

namespace tandem::python {

using nlohmann::json;

// JSON text, invalid UTF-8 replaced (a class folder's name need not be UTF-8).
std::string dump(const json& j);

// numpy's name for `d` ("float32", "uint8"); ConfigError for bfloat16, which has none.
std::string numpy_dtype(data::DType d);

// The request's settings, [[key, [values]], ...], as feed_settings takes them.
std::vector<Setting> settings_of(const json& request);

// Whether the request's settings, or the launcher's (TANDEM_SETTINGS), name a dataset.
bool names_data(const json& request);

// A request's "state" (a tandem_feed_state() the script saved): its place in the data,
// nullopt when there is none; ConfigError naming the problem when it is not one.
std::optional<data::DataPosition> resume_of(const json& request);
// A feed's state before `step` (tandem_feed_state): the version, the step, the place `at`
// (feed::position_json) and the dataset's fingerprint.
json feed_state(uint64_t step, const data::DataPosition& at, const std::string& fingerprint);
// The step a request starts at: its state's step, else start_step (both: ConfigError).
uint64_t start_step_of(const json& request);

template <typename T>
std::optional<T> optional_of(const json& request, const char* key) {
  if (!request.contains(key) || request.at(key).is_null()) return std::nullopt;
  return request.at(key).get<T>();
}

// The dataset as Python sees it (class names as hex).
// `normalized`: the images land as float32 already normalised (tandem.Feed(images=...)).
json dataset_json(const data::DatasetInfo& i, const std::string& dtype, bool normalized = false);

// A delivered batch and the description Python reads it by (made once, on the feed's side).
struct CBatch {
  data::Batch batch;
  std::string description;
};

// A batch as the one tab-separated line Python reads it by.
std::string describe(const data::Batch& b, const std::string& source);

// Where a script's summary goes: summary_json, else under an existing SageMaker root;
// "" when neither (no records are kept).
std::string script_summary_path(const Settings& settings);

// The process's run records (feed::ScriptRun) for a feed at `place`: see feed_words.cc.
std::shared_ptr<feed::ScriptRun> script_run(const Settings& settings, const FeedPlace& place,
                                              uint64_t steps_per_epoch, uint64_t start_step);

// Each source's batches, samples, compute time, failure and rejoins; hedged requests.
json stats_json(const feed::Feeder& f);

}  // namespace tandem::python
