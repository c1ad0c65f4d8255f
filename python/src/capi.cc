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

#include "buffer_pool.h"
#include "feed_env.h"
#include "feed_images.h"
#include "feed_handle.h"
#include "feed_words.h"
#include "feed_settings.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/feed/feeder.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/feed/run_summary.h"
#include "tandem/feed/script_run.h"
#include "tandem/launch/feed_settings.h"
#include "tandem/report/output_root.h"

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

// What a Feed with this request would deliver: steps, batch size, batches per epoch and
// the dataset, found as the Feed finds it (this host's copy of --data, else learnt from
// the workers: then it waits for one to answer, up to connect_timeout).
std::string plan(const json& request, const std::atomic<bool>& stop) {
  const Settings settings = feed_settings(with_launcher_settings(settings_of(request)));
  const FeedPlace place = feed_place(optional_of<std::vector<std::string>>(request, "workers"),
                                     optional_of<int>(request, "rank"), optional_of<int>(request, "world"), settings,
                                     /*need_workers=*/false);
  const std::string dtype = numpy_dtype(data::wire_dtype(settings.data));
  const uint64_t start_step = start_step_of(request);
  feed::FeederOptions f{place.workers, place.rank, place.world, request.value("local_threads", 0), start_step,
                        std::nullopt, names_data(request), place.relay};
  const auto feed =
      std::make_unique<feed::RankFeed>(feed::feeder_feed_options(launch::feed_options(settings, {}, 0, 1), f), stop);
  const bool learnt = !f.data_given && f.local_threads == 0 && settings.data.wire_dtype.empty();
  const auto steps = static_cast<uint64_t>(settings.trainer.steps);
  if (start_step > steps) {
    throw ConfigError("start_step " + std::to_string(start_step) + " is past steps " + std::to_string(steps) +
                      ": resume at a step before the last");
  }
  return dump({{"steps", steps - start_step},
               {"batch_size", settings.trainer.batch_size},
               {"batches_per_epoch", feed->sampler().batches_per_epoch()},
               {"dataset", dataset_json(feed->info(), learnt ? numpy_dtype(feed->info().dtype) : dtype,
                                        float_images(request, feed->info()))},
               {"rank", place.rank},
               {"world", place.world},
               {"workers", place.workers},
               {"state", feed_state(start_step, feed->sampler().position(start_step), feed->info().fingerprint)}});
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
  // Batches land in reused blocks: no page faults on fresh memory per batch, and blocks
  // pin_memory page-locks once.
  use_buffer_pool(true);
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

int tandem_feed_end(void* feed, const char* why, int interrupted) {
  return guarded(-1, [&] {
    static_cast<Feed*>(feed)->close(why && *why ? why : "training script finished", interrupted != 0);
    return 0;
  });
}

int tandem_feed_log(void* feed, const char* name, double value) {
  return guarded(-1, [&] {
    static_cast<Feed*>(feed)->log(name, value);
    return 0;
  });
}

int tandem_feed_shutdown(void* feed) {
  return guarded(-1, [&] { return static_cast<Feed*>(feed)->shutdown(); });
}

const char* tandem_feed_stats(void* feed) {
  return guarded<const char*>(nullptr, [&] { return give(static_cast<Feed*>(feed)->stats()); });
}

const char* tandem_feed_state(void* feed, unsigned long long step) {
  return guarded<const char*>(nullptr, [&] { return give(static_cast<Feed*>(feed)->state(step)); });
}

void tandem_feed_keep_workers(void* feed) { static_cast<Feed*>(feed)->keep_workers(); }

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

void tandem_use_buffer_pool(int on) { use_buffer_pool(on != 0); }

const char* tandem_buffer_pool_stats(void) { return give(buffer_pool_stats()); }

}  // extern "C"
