// libtandem_feed.so (capi.h): tandem's feed (feed::Feeder, one RankFeed) behind a C ABI
// for the ctypes layer python/tandem/_tandem.py. Batches are handed out whole; Python
// views their buffers with numpy and frees them when the last view goes.
#include "capi.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "feed_env.h"
#include "feed_settings.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/feed/feeder.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/report/output_root.h"
#include "tandem/report/run_summary.h"
#include "tandem/report/script_run.h"

using nlohmann::json;

namespace tandem::python {
namespace {

thread_local int error_kind = 0;
thread_local std::string error_message;
thread_local std::string answer;  // the string a call returns

const char* give(std::string s) {
  answer = std::move(s);
  return answer.c_str();
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Runs `f`, turning what it throws into the thread's error and `failed`.
template <typename R, typename F>
R guarded(R failed, F&& f) {
  try {
    return f();
  } catch (const ConfigError& e) {
    error_kind = TANDEM_VALUE_ERROR;
    error_message = e.what();
  } catch (const json::exception& e) {
    error_kind = TANDEM_VALUE_ERROR;
    error_message = std::string("tandem's Python layer sent a request the library cannot read: ") + e.what();
  } catch (const std::exception& e) {
    error_kind = TANDEM_RUNTIME_ERROR;
    error_message = e.what();
  }
  return failed;
}

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
bool names_data(const json& request) {
  const std::vector<Setting> all = with_launcher_settings(settings_of(request));
  return std::any_of(all.begin(), all.end(), [](const Setting& s) { return s.key == "data"; });
}

template <typename T>
std::optional<T> optional_of(const json& request, const char* key) {
  if (!request.contains(key) || request.at(key).is_null()) return std::nullopt;
  return request.at(key).get<T>();
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The dataset as Python sees it. Class names travel as hex (folder names need not be
// UTF-8: Python decodes them with surrogateescape, as os.listdir does).
json dataset_json(const data::DatasetInfo& i, const std::string& dtype) {
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
          {"fields", fields}};
}

// A delivered batch and the description Python reads it by (made once, on the feed's side).
struct CBatch {
  data::Batch batch;
  std::string description;
};

// A batch as Python reads it, in one line of text split by tabs (this is per batch: JSON
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

// The process's run records (report::ScriptRun), made by its first feed on rank 0: the
// feeds of one script (one per epoch) add up to one run. A feed told to write elsewhere
// (another sagemaker_root or summary_json) starts another. They go only where the feed is
// told: beside summary_json, or under an existing SageMaker root (SageMaker, tandem
// launch, simulate); never into whatever folder the script runs in. Null without either,
// or when the output folder cannot be made.
std::shared_ptr<report::ScriptRun> script_run(const Settings& settings, const FeedPlace& place,
                                              uint64_t steps_per_epoch, uint64_t start_step) {
  static std::mutex mu;
  static std::shared_ptr<report::ScriptRun> run;
  static std::optional<std::string> made_for;  // where the run was asked to write
  std::lock_guard lock(mu);
  std::error_code ec;
  const std::string root = settings.cluster.sagemaker_root;
  const std::string wanted = settings.trainer.summary_json + "\n" + (std::filesystem::is_directory(root, ec) ? root : "");
  if (made_for == wanted) return run;
  made_for = wanted;
  run.reset();
  std::string summary = settings.trainer.summary_json;
  if (summary.empty()) {
    if (!std::filesystem::is_directory(root, ec)) {
      spdlog::info("no run records (metrics.jsonl, summary.json, report.html): no SageMaker root at {}; pass "
                   "summary_json=PATH (or sagemaker_root=DIR) to keep them", root);
      return nullptr;
    }
    const std::string out = report::output_root(settings, place.rank);
    if (out.empty()) return nullptr;
    summary = out + "/output/data/summary.json";
  }
  report::ScriptRunOptions o{summary, start_step > 0, place.rank, place.world, settings.trainer.log_every,
                             steps_per_epoch};
  try {
    run = std::make_shared<report::ScriptRun>(o);
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

// tandem.Feed's C++ half. next() may wait in one Python thread while another calls
// close(): the feeder then only closes (that wait returns at once) and goes when the
// last call inside it leaves.
class Feed {
 public:
  explicit Feed(const json& request)
      : release_(request.value("release_workers", false)),
        settings_(feed_settings(with_launcher_settings(settings_of(request)))) {
    dtype_ = numpy_dtype(data::wire_dtype(settings_.data));
    const int local_threads = request.value("local_threads", 0);
    place_ = feed_place(optional_of<std::vector<std::string>>(request, "workers"), optional_of<int>(request, "rank"),
                        optional_of<int>(request, "world"), settings_, /*need_workers=*/local_threads == 0);
    feed::FeederOptions opts{place_.workers, place_.rank,  place_.world, local_threads,
                             request.value("start_step", uint64_t{0}), optional_of<uint64_t>(request, "epoch"),
                             names_data(request)};
    learns_dtype_ = !opts.data_given && local_threads == 0 && settings_.data.wire_dtype.empty();
    feeder_ = std::make_unique<feed::Feeder>(settings_, std::move(opts));
  }

  // True once started; then the facts Python keeps are ready (info()).
  bool wait_started(double seconds) {
    Inside in(*this);
    if (!in.feeder) throw std::runtime_error("the feed was closed before it started");
    if (!in.feeder->wait_started(seconds)) return false;
    std::lock_guard lock(mu_);
    if (info_.empty()) {
      batches_per_epoch_ = feeder_->sampler().batches_per_epoch();
      info_ = dump({{"length", feeder_->steps() - feeder_->start_step()},
                    {"batch_size", settings_.trainer.batch_size},
                    {"batches_per_epoch", batches_per_epoch_},
                    {"rank", place_.rank},
                    {"world", place_.world},
                    {"dataset", dataset_json(feeder_->info(), learns_dtype_ ? numpy_dtype(feeder_->info().dtype) : dtype_)}});
      if (place_.rank == 0) run_ = script_run(settings_, place_, batches_per_epoch_, feeder_->start_step());
    }
    return true;
  }

  const std::string& info() const { return info_; }

  int next(double seconds, CBatch** out) {
    Inside in(*this);
    if (!in.feeder) return TANDEM_NEXT_END;
    std::optional<data::Batch> batch;
    if (run_) run_->waiting();
    feed::Feeder::Status status;
    try {
      status = in.feeder->next(seconds, batch);
    } catch (...) {
      in.release();
      close();
      throw;
    }
    if (status == feed::Feeder::Status::kEnd) {
      in.release();
      close();
      return TANDEM_NEXT_END;
    }
    if (status != feed::Feeder::Status::kBatch) return TANDEM_NEXT_WAIT;
    if (batch->dtype == data::DType::kBFloat16) {
      in.release();
      close();
      throw ConfigError("the data workers send bfloat16 batches (their --wire-dtype), which numpy cannot hold: "
                        "start them with --wire-dtype float16, float32 or uint8");
    }
    if (run_) run_->taken(batch->size(), batch->sequence, in.feeder->steps(), [&] { return in.feeder->stats(); });
    auto* c = new CBatch{std::move(*batch), {}};
    c->description = describe(c->batch, source_name(*in.feeder, c->batch.source));
    *out = c;
    return TANDEM_NEXT_BATCH;
  }

  // Stops the feed's threads; tells the workers to exit when release_workers was asked.
  void close() {
    feed::Feeder* f = nullptr;
    bool release = false;
    {
      std::lock_guard lock(mu_);
      if (!feeder_ || closing_) return;
      closing_ = true;
      release = release_ && !released_;
      released_ = released_ || release;
      f = feeder_.get();
    }
    f->close();
    bool alone = false;
    {
      std::lock_guard lock(mu_);
      alone = busy_ == 0;
    }
    if (alone) write_records(*f);  // first: the records ask the workers what they are, before they go
    if (release) f->shutdown_workers("training script finished");
    std::lock_guard lock(mu_);
    stats_ = dump(stats_json(*f));
    if (busy_ == 0) feeder_.reset();  // else the last call inside lets it go
  }

  int shutdown() {
    Inside in(*this);
    if (!in.feeder) throw std::runtime_error("shutdown() on a closed feed: call tandem.shutdown_workers(workers)");
    released_ = true;
    return in.feeder->shutdown_workers("training script finished");
  }

  std::string stats() {
    Inside in(*this);
    if (!in.feeder || !in.feeder->started()) {
      std::lock_guard lock(mu_);
      return stats_.empty() ? dump({{"sources", json::array()}, {"hedged_requests", 0}}) : stats_;
    }
    return dump(stats_json(*in.feeder));
  }

 private:
  // A call inside the feeder: it stays alive until the call leaves (close() on another
  // thread only closes it). `feeder` is null once the feed is closed.
  struct Inside {
    Feed& f;
    feed::Feeder* feeder = nullptr;
    bool in = false;
    explicit Inside(Feed& feed) : f(feed) {
      std::lock_guard lock(f.mu_);
      if (f.feeder_ && !f.closing_) {
        feeder = f.feeder_.get();
        ++f.busy_;
        in = true;
      }
    }
    void release() {
      if (!in) return;
      in = false;
      std::lock_guard lock(f.mu_);
      if (--f.busy_ == 0 && f.closing_ && !f.stats_.empty()) f.feeder_.reset();
    }
    ~Inside() { release(); }
  };

  std::string source_name(const feed::Feeder& f, int source) {
    if (source < 0) return "";
    if (static_cast<size_t>(source) >= names_.size()) {
      names_.clear();
      for (const auto& s : f.stats()) names_.push_back(s.name);
    }
    return static_cast<size_t>(source) < names_.size() ? names_[source] : "";
  }

  // Rank 0: adds this feed to the run's records and writes the summary and report.html
  // (a feed that delivered nothing adds nothing). Never throws: the script's batches
  // matter more than its records.
  void write_records(const feed::Feeder& f) {
    if (!run_ || !f.started()) return;
    const std::vector<feed::SourceStats> sources = f.stats();
    uint64_t batches = 0;
    for (const auto& s : sources) batches += s.batches;
    run_->feed_ended(sources, f.hedged());
    if (batches == 0) return;
    report::RunSummaryFacts facts{settings_, f.rank_feed(), {}, 0, place_.cluster};
    facts.world = place_.world;
    facts.local_world = place_.local_world;
    facts.local_threads = f.rank_feed().local_threads();
    facts.batch_size = settings_.trainer.batch_size;
    facts.steps_per_epoch = batches_per_epoch_;
    facts.simulated = place_.simulated;
    try {
      run_->write_summary(facts);
    } catch (const std::exception& e) {
      spdlog::warn("no summary for this run: {}", e.what());
    }
  }

  std::mutex mu_;  // guards feeder_, busy_, closing_, stats_, info_
  std::unique_ptr<feed::Feeder> feeder_;
  bool release_ = false;
  std::atomic<bool> released_{false};
  Settings settings_;
  FeedPlace place_;
  std::string dtype_;
  bool learns_dtype_ = false;  // a dataset learnt from the workers: its dtype is theirs
  std::shared_ptr<report::ScriptRun> run_;  // the process's run (rank 0), or null
  uint64_t batches_per_epoch_ = 0;
  std::string info_;
  std::vector<std::string> names_;  // used by the one thread in next()
  int busy_ = 0;
  bool closing_ = false;
  std::string stats_;  // kept at close()
};

// What a Feed with this request would deliver: steps, batch size, batches per epoch and
// the dataset, found as the Feed finds it (this host's copy of --data, else learnt from
// the workers: then it waits for one to answer, up to connect_timeout).
std::string plan(const json& request, const std::atomic<bool>& stop) {
  const Settings settings = feed_settings(with_launcher_settings(settings_of(request)));
  const FeedPlace place = feed_place(optional_of<std::vector<std::string>>(request, "workers"),
                                     optional_of<int>(request, "rank"), optional_of<int>(request, "world"), settings,
                                     /*need_workers=*/false);
  const std::string dtype = numpy_dtype(data::wire_dtype(settings.data));
  const uint64_t start_step = request.value("start_step", uint64_t{0});
  feed::FeederOptions f{place.workers, place.rank, place.world, request.value("local_threads", 0), start_step,
                        std::nullopt, names_data(request)};
  for (auto& w : f.workers) w = cluster::with_default_port(w, settings.cluster.worker_port);
  const auto feed = std::make_unique<feed::RankFeed>(feed::feeder_feed_options(settings, f), stop);
  const bool learnt = !f.data_given && f.local_threads == 0 && settings.data.wire_dtype.empty();
  const auto steps = static_cast<uint64_t>(settings.trainer.steps);
  if (start_step > steps) {
    throw ConfigError("start_step " + std::to_string(start_step) + " is past steps " + std::to_string(steps) +
                      ": resume at a step before the last");
  }
  return dump({{"steps", steps - start_step},
               {"batch_size", settings.trainer.batch_size},
               {"batches_per_epoch", feed->sampler().batches_per_epoch()},
               {"dataset", dataset_json(feed->info(), learnt ? numpy_dtype(feed->info().dtype) : dtype)},
               {"rank", place.rank},
               {"world", place.world},
               {"workers", place.workers}});
}

// A plan on a thread of its own: Python polls it (tandem_task_wait) so that Ctrl-C lands.
struct Task {
  std::atomic<bool> stop{false};
  std::future<std::string> result;
  std::optional<std::string> answer;
  int error_kind = 0;
  std::string error;
};

}  // namespace
}  // namespace tandem::python

using namespace tandem::python;

extern "C" {

int tandem_capi_version(void) { return TANDEM_CAPI_VERSION; }
const char* tandem_version(void) { return "0.1.0"; }
int tandem_error_kind(void) { return error_kind; }
const char* tandem_error_message(void) { return error_message.c_str(); }

void tandem_init(void) {
  // A Python dataset made in this process (local_threads, tandem.plan) runs the
  // _dataset_worker.py installed beside this library (the package's folder), unless
  // TANDEM_DATASET_WORKER says otherwise: the process's binary is Python's, not tandem's.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&tandem_init), &info) != 0 && info.dli_fname) {
    const auto script = std::filesystem::path(info.dli_fname).parent_path() / "_dataset_worker.py";
    std::error_code ec;
    if (std::filesystem::is_regular_file(script, ec)) setenv("TANDEM_DATASET_WORKER", script.c_str(), 0);
  }
  // Log lines go to stderr, as the command line's do; stdout stays the script's.
  if (!spdlog::get("tandem")) spdlog::set_default_logger(spdlog::stderr_color_mt("tandem"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ tandem: %v");
}

const char* tandem_setting_names(void) {
  return guarded<const char*>(nullptr, [] { return give(dump(feed_setting_names())); });
}

int tandem_set_log_level(const char* level) {
  return guarded(-1, [&] {
    const std::string l(level);
    const spdlog::level::level_enum e = spdlog::level::from_str(l == "warning" ? "warn" : l);
    if (e == spdlog::level::off && l != "off") {
      throw tandem::ConfigError("unknown log level '" + l + "': use debug, info, warning, error or off");
    }
    spdlog::set_level(e);
    return 0;
  });
}

int tandem_shutdown_workers(const char* request) {
  return guarded(-1, [&] {
    const json r = json::parse(request);
    const tandem::Settings settings = feed_settings(settings_of(r));
    return tandem::feed::release_workers(r.at("workers").get<std::vector<std::string>>(), settings.security,
                                         r.value("reason", std::string("training script finished")));
  });
}

void* tandem_plan_begin(const char* request) {
  return guarded<void*>(nullptr, [&] {
    auto task = std::make_unique<Task>();
    task->result = std::async(std::launch::async, [t = task.get(), r = json::parse(request)] { return plan(r, t->stop); });
    return task.release();
  });
}

int tandem_task_wait(void* task, double seconds) {
  auto* t = static_cast<Task*>(task);
  if (t->answer || t->error_kind) return 1;
  if (t->result.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) return 0;
  const char* got = guarded<const char*>(nullptr, [&] { return give(t->result.get()); });
  if (got) {
    t->answer = got;
  } else {
    t->error_kind = error_kind;
    t->error = error_message;
  }
  return 1;
}

const char* tandem_task_result(void* task) {
  auto* t = static_cast<Task*>(task);
  if (t->answer) return give(*t->answer);
  error_kind = t->error_kind ? t->error_kind : TANDEM_RUNTIME_ERROR;
  error_message = t->error_kind ? t->error : "the plan has not finished: wait for it first";
  return nullptr;
}

void tandem_task_free(void* task) {
  auto* t = static_cast<Task*>(task);
  t->stop = true;
  if (t->result.valid()) t->result.wait();
  delete t;
}

void* tandem_feed_open(const char* request) {
  return guarded<void*>(nullptr, [&] { return new Feed(json::parse(request)); });
}

int tandem_feed_wait_started(void* feed, double seconds) {
  return guarded(-1, [&] { return static_cast<Feed*>(feed)->wait_started(seconds) ? 1 : 0; });
}

const char* tandem_feed_info(void* feed) { return give(static_cast<Feed*>(feed)->info()); }

int tandem_feed_next(void* feed, double seconds, void** batch) {
  return guarded(static_cast<int>(TANDEM_NEXT_ERROR), [&] {
    CBatch* b = nullptr;
    const int status = static_cast<Feed*>(feed)->next(seconds, &b);
    *batch = b;
    return status;
  });
}

int tandem_feed_close(void* feed) {
  return guarded(-1, [&] {
    static_cast<Feed*>(feed)->close();
    return 0;
  });
}

int tandem_feed_shutdown(void* feed) {
  return guarded(-1, [&] { return static_cast<Feed*>(feed)->shutdown(); });
}

const char* tandem_feed_stats(void* feed) {
  return guarded<const char*>(nullptr, [&] { return give(static_cast<Feed*>(feed)->stats()); });
}

void tandem_feed_free(void* feed) {
  auto* f = static_cast<Feed*>(feed);
  guarded(0, [&] {
    f->close();
    return 0;
  });
  delete f;
}

const char* tandem_batch_json(void* batch) { return static_cast<CBatch*>(batch)->description.c_str(); }

void tandem_batch_free(void* batch) { delete static_cast<CBatch*>(batch); }

}  // extern "C"
