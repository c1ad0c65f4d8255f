// Internal to libtandem_feed.so (capi.cc): tandem.Feed's C++ half, one feed::Feeder,
// behind the C ABI's tandem_feed_* calls.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <optional>
#include <vector>

#include "feed_words.h"
#include "tandem/cluster/endpoint.h"
#include "tandem/common/cpu_time.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/feed/feeder.h"
#include "tandem/feed/sample_audit.h"
#include "tandem/launch/feed_settings.h"
#include "tandem/launch/run_settings.h"
#include "capi.h"
#include "feed_images.h"

namespace tandem::python {

// tandem.Feed's C++ half. next() may wait in one Python thread while another calls
// close(): the feeder then only closes (that wait returns at once) and goes when the
// last call inside it leaves.
class Feed {
 public:
  explicit Feed(const json& request)
      : release_(request.value("release_workers", false)),
        request_(request),
        settings_(feed_settings(with_launcher_settings(settings_of(request)))) {
    dtype_ = numpy_dtype(data::wire_dtype(settings_.data));
    const int local_threads = request.value("local_threads", 0);
    // Workers from a watch file or a DNS name (worker_directory.h) come with the feed's options.
    const bool listed = !settings_.trainer.workers_watch.empty() || !settings_.trainer.worker_service.empty();
    place_ = feed_place(optional_of<std::vector<std::string>>(request, "workers"), optional_of<int>(request, "rank"),
                        optional_of<int>(request, "world"), settings_, /*need_workers=*/local_threads == 0 && !listed);
    feed::FeederOptions opts{place_.workers, place_.rank,  place_.world, local_threads,
                             start_step_of(request), optional_of<uint64_t>(request, "epoch"),
                             names_data(request), place_.relay, resume_of(request)};
    saved_fingerprint_ = request.contains("state") && request["state"].is_object()
                             ? request["state"].value("fingerprint", std::string()) : std::string();
    learns_dtype_ = !opts.data_given && local_threads == 0 && settings_.data.wire_dtype.empty();
    feed::FeedOptions feed = launch::feed_options(settings_, {}, opts.rank, opts.world);
    feeder_ = std::make_unique<feed::Feeder>(std::move(opts), std::move(feed), static_cast<uint64_t>(settings_.trainer.steps));
  }

  // True once started; then the facts Python keeps are ready (info()).
  bool wait_started(double seconds) {
    Inside in(*this);
    if (!in.feeder) throw std::runtime_error("the feed was closed before it started");
    if (!in.feeder->wait_started(seconds)) return false;
    std::lock_guard lock(mu_);
    if (info_.empty()) {
      batches_per_epoch_ = feeder_->sampler().batches_per_epoch();
      check_saved_dataset(feeder_->info());
      const data::Sampler& plan = feeder_->sampler();
      geometry_ = plan.position(feeder_->start_step());
      anchor_ = plan.anchor();
      floats_ = float_images(request_, feeder_->info());
      info_ = dump({{"length", feeder_->steps() - feeder_->start_step()},
                    {"start_step", feeder_->start_step()},
                    {"batch_size", settings_.trainer.batch_size},
                    {"batches_per_epoch", batches_per_epoch_},
                    {"rank", place_.rank},
                    {"world", place_.world},
                    {"dataset", dataset_json(feeder_->info(), learns_dtype_ ? numpy_dtype(feeder_->info().dtype) : dtype_,
                                             floats_)}});
      if (place_.rank == 0) run_ = script_run(settings_, place_, batches_per_epoch_, feeder_->start_step());
      if (place_.rank != 0 && place_.world > 1) mark_at_ = script_summary_path(settings_);
    }
    return true;
  }

  const std::string& info() const { return info_; }

  // state_dict(): the place before `step` in the data, which a feed of any world size
  // or batch size resumes from exactly (FeederOptions::resume).
  std::string state(uint64_t step) {
    std::lock_guard lock(mu_);
    if (info_.empty()) throw std::runtime_error("state_dict() before the feed started");
    const data::DataPosition p = data::position_at(step, geometry_.dataset_size, geometry_.batch_size,
                                                   geometry_.world, anchor_);
    return dump(feed_state(step, p, fingerprint_));
  }

  int next(double seconds, CBatch** out) {
    Inside in(*this);
    if (!in.feeder) return TANDEM_NEXT_END;
    std::optional<data::Batch> batch;
    emulate_slower_step();
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
    if (run_) {
      run_->taken(batch->size(), batch->sequence, in.feeder->steps(), [&] { return in.feeder->stats(); });
      run_->note_in_flight(in.feeder->rank_feed().scheduler().in_flight());
    }
    if (!mark_at_.empty()) {  // this rank trains: rank 0's summary counts it
      feed::mark_rank_training(mark_at_, place_.rank, place_.launch);
      mark_at_.clear();
    }
    if (floats_) land_as_float(*batch, in.feeder->info());
    auto* c = new CBatch{std::move(*batch), {}};
    c->description = describe(c->batch, source_name(*in.feeder, c->batch.source));
    *out = c;
    step_started_ = Clock::now();  // the script's step starts now
    return TANDEM_NEXT_BATCH;
  }

  // --emulate-step-ms (simulations only): the script's step, since the last batch, takes
  // at least that long. Once per batch asked for.
  void emulate_slower_step() {
    if (!step_started_) return;
    pad_step(*step_started_, settings_.trainer.emulate_step_ms);
    step_started_.reset();
  }

  // What the script reports (ScriptRun::reported), on rank 0; other ranks check it alone.
  void log(const std::string& name, double value) {
    std::lock_guard lock(mu_);
    if (run_) return run_->reported(name, value);
    feed::ScriptRun::check_reported(name, value);
  }

  // Stops the feed's threads; tells the workers to exit when release_workers was asked,
  // with `why` in their log (the script finished, crashed, or was stopped). `interrupted`:
  // a signal stopped the script (SIGTERM), which its summary says.
  void close(const std::string& why = "training script finished", bool interrupted = false) {
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
    if (interrupted && run_) run_->interrupted();
    if (alone) write_records(*f);  // first: the records ask the workers what they are, before they go
    if (release) f->shutdown_workers(why);
    std::lock_guard lock(mu_);
    stats_ = dump(stats_json(*f));
    if (busy_ == 0) feeder_.reset();  // else the last call inside lets it go
  }

  // Its end will not release the workers (a new feed takes its place).
  void keep_workers() {
    std::lock_guard lock(mu_);
    release_ = false;
  }

  int shutdown(const std::string& why = "training script finished") {
    Inside in(*this);
    if (!in.feeder) throw std::runtime_error("shutdown() on a closed feed: call tandem.shutdown_workers(workers)");
    released_ = true;
    return in.feeder->shutdown_workers(why);
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
    feed::RunSummaryFacts facts{launch::run_settings(settings_, f.rank_feed().info(), /*script=*/true), f.rank_feed(), {},
                                0, place_.cluster};
    facts.world = run_->ranks();
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
  json request_;         // as Python sent it (images=)
  bool floats_ = false;  // images land as float32, normalised (feed_images.h)
  std::atomic<bool> released_{false};
  Settings settings_;
  FeedPlace place_;
  std::string dtype_;
  bool learns_dtype_ = false;  // a dataset learnt from the workers: its dtype is theirs
  std::shared_ptr<feed::ScriptRun> run_;  // the process's run (rank 0), or null
  std::string mark_at_;  // another rank's summary path, until its first batch is marked
  uint64_t batches_per_epoch_ = 0;
  std::string info_;
  std::vector<std::string> names_;  // used by the one thread in next()
  std::optional<Clock::time_point> step_started_;  // when the last batch was handed out (emulate_slower_step)
  int busy_ = 0;
  bool closing_ = false;
  std::string stats_;  // kept at close()
  data::DataPosition geometry_;      // the sampler's, for state()
  data::DataAnchor anchor_;
  std::string fingerprint_;          // the dataset's
  std::string saved_fingerprint_;    // the resumed state's, "" = none

  // A state saved over another dataset is refused by name (its samples are other samples).
  void check_saved_dataset(const data::DatasetInfo& info) {
    fingerprint_ = info.fingerprint;
    if (saved_fingerprint_.empty() || saved_fingerprint_ == info.fingerprint) return;
    throw ConfigError("the state was saved by a feed of another dataset (fingerprint " + saved_fingerprint_ +
                      ", this feed's " + info.name + " is " + info.fingerprint + "): resume with the data, seed and "
                      "pipeline it was saved with");
  }
};

}  // namespace tandem::python
