#include "tandem/data/io/read_ahead.h"

#include <algorithm>
#include <thread>

#include <spdlog/spdlog.h>

#include "read_engines.h"
#include "tandem/common/cpu_time.h"
#include "tandem/common/error.h"
#include "tandem/common/thread_pool.h"

namespace tandem::data {

int io_threads_for(int requested) {
  if (requested >= 0) return requested;
  // The cores this process may run on (taskset, a cgroup's quota), not the machine's: a
  // worker given 4 of 16 cores makes a quarter of the images, and needs a quarter of the reads.
  return std::clamp(32 * available_cores(), 64, 1024);
}

int uring_reads_for(int requested) { return requested >= 0 ? requested : 4096; }

IoEngine parse_io_engine(const std::string& name) {
  if (name == "auto") return IoEngine::kAuto;
  if (name == "uring") return IoEngine::kUring;
  if (name == "threads") return IoEngine::kThreads;
  throw ConfigError("--io-engine '" + name + "': use auto, uring or threads");
}

const char* io_engine_name(IoEngine engine) {
  switch (engine) {
    case IoEngine::kUring: return "uring";
    case IoEngine::kThreads: return "threads";
    case IoEngine::kAuto: break;
  }
  return "auto";
}

// The slots of one batch's samples. One lock for every batch's slots and the bytes held:
// the Core's (reads are milliseconds; the lock is held for nanoseconds).
namespace {
enum class SlotState { kQueued, kReading, kReady, kDone };
}  // namespace

struct SampleReads::Batch {
  struct Slot {
    SlotState state = SlotState::kQueued;
    Fetched fetched;
  };
  std::shared_ptr<ReadAhead::Core> core;
  std::vector<Slot> slots;  // GUARDED_BY(core->mu)
  bool abandoned = false;   // GUARDED_BY(core->mu): its SampleReads is gone
};

// --- the Core ----------------------------------------------------------------------------

bool ReadAhead::Core::can_start() const {
  return !queue.empty() && in_flight < static_cast<uint64_t>(max_in_flight) && held + in_flight_bytes < max_bytes;
}

std::optional<ReadJob> ReadAhead::Core::next_job() {
  while (can_start()) {
    ReadJob job = std::move(queue.front());
    queue.pop_front();
    auto& slot = job.batch->slots[job.position];
    if (stopping || job.batch->abandoned || slot.state != SlotState::kQueued) continue;  // taken over, or dropped
    slot.state = SlotState::kReading;
    // Before any read ended, the reads in flight may have the bytes between them.
    const double mean = depth.mean_bytes();
    job.reserved = mean >= 1 ? static_cast<uint64_t>(mean) : max_bytes / static_cast<uint64_t>(max_in_flight);
    job.began = Clock::now();
    ++in_flight;
    in_flight_bytes += job.reserved;
    most_in_flight = std::max(most_in_flight, in_flight);
    return job;
  }
  return std::nullopt;
}

void ReadAhead::Core::finish(ReadJob& job, Fetched fetched) {
  {
    std::lock_guard lock(mu);
    --in_flight;
    in_flight_bytes -= job.reserved;
    depth.read(seconds_since(job.began), fetched.bytes.size());
    auto& slot = job.batch->slots[job.position];
    if (job.batch->abandoned) {
      slot.state = SlotState::kDone;
    } else {
      held += fetched.bytes.size();
      ++held_samples;
      slot.fetched = std::move(fetched);
      slot.state = SlotState::kReady;
    }
  }
  ready.notify_all();  // the preprocessing threads (a few) waiting on a read in flight
}

int64_t ReadAhead::Core::wanted_more() const {
  const uint64_t known = queue.size() + in_flight + held_samples;
  return static_cast<int64_t>(depth.wanted(Clock::now(), max_bytes)) - static_cast<int64_t>(known);
}

ReadPlan ReadAhead::Core::plan(uint64_t key) const {
  ReadPlan p = source.plan(key);
  p.most_bytes = std::min(p.most_bytes, max_bytes);
  return p;
}

Fetched ReadAhead::Core::read_now(const ReadJob& job) const {
  if (latency_s > 0) std::this_thread::sleep_for(seconds(latency_s));
  Fetched f = read_blocking(plan(job.key));
  if (f.problem.empty() && source.check) source.check(job.key, f);
  return f;
}

// --- one batch's reads ---------------------------------------------------------------------

SampleReads::~SampleReads() {
  auto& core = *batch_->core;
  bool freed = false;
  {
    std::lock_guard lock(core.mu);
    batch_->abandoned = true;
    for (Batch::Slot& slot : batch_->slots) {
      if (slot.state != SlotState::kReady) continue;
      core.held -= slot.fetched.bytes.size();
      --core.held_samples;
      slot.fetched = {};
      slot.state = SlotState::kDone;
      freed = true;
    }
    freed = freed && core.can_start();
  }
  if (freed) core.engine->wake();  // its queued reads are skipped when they come up
}

std::optional<Fetched> SampleReads::take(size_t position) {
  auto& core = *batch_->core;
  std::unique_lock lock(core.mu);
  Batch::Slot& slot = batch_->slots.at(position);
  const bool waits = slot.state == SlotState::kQueued || slot.state == SlotState::kReading;
  core.depth.took(Clock::now(), waits);
  core.ready.wait(lock, [&] { return slot.state != SlotState::kReading; });
  const SlotState was = slot.state;
  slot.state = SlotState::kDone;
  std::optional<Fetched> out;
  if (was == SlotState::kReady) {
    core.held -= slot.fetched.bytes.size();
    --core.held_samples;
    out = std::move(slot.fetched);
    slot.fetched = {};
  }
  // Bytes given back: room for one more read. A slot taken over while queued needs no
  // wake-up: its read is skipped when it comes up.
  const bool more = was == SlotState::kReady && core.can_start();
  lock.unlock();
  if (more) core.engine->wake();
  if (out) add_helper_cpu_seconds(out->cpu_seconds);  // the I/O side worked for this one
  return out;
}

int64_t SampleReads::wanted_more() const {
  std::lock_guard lock(batch_->core->mu);
  return batch_->core->wanted_more();
}


// --- the read-ahead ------------------------------------------------------------------------

namespace {

// The engine `opts` asks for: io_uring when it starts (kAuto falls back to threads, saying
// why once), else I/O threads running the plans.
std::unique_ptr<ReadEngine> engine_for(ReadAhead::Core& core, const ReadAheadOptions& opts) {
  if (opts.engine != IoEngine::kThreads) {
    std::string why;
    core.max_in_flight = std::max(1, uring_reads_for(opts.io_threads));
    if (auto uring = make_uring_engine(core, core.max_in_flight, why)) return uring;
    if (opts.engine == IoEngine::kUring) {
      throw ConfigError("--io-engine uring: io_uring cannot start here (" + why +
                        "): use --io-engine threads, or allow io_uring (a container's seccomp profile)");
    }
    static std::once_flag said;
    std::call_once(said, [&] { spdlog::info("reading ahead with I/O threads: io_uring cannot start here ({})", why); });
  }
  core.max_in_flight = std::max(1, io_threads_for(opts.io_threads));
  return make_thread_engine(core, core.max_in_flight, [&core](const ReadJob& job) { return core.read_now(job); });
}

}  // namespace

ReadAhead::ReadAhead(ReadAheadOptions opts, ReadSource source)
    : opts_(opts), core_(std::make_shared<Core>(opts, std::move(source))) {
  core_->engine = engine_for(*core_, opts_);
}

ReadAhead::ReadAhead(ReadAheadOptions opts, std::function<Fetched(uint64_t key)> read)
    : opts_(opts), core_(std::make_shared<Core>(opts, ReadSource{})) {
  core_->max_in_flight = std::max(1, io_threads_for(opts_.io_threads));
  core_->engine = make_thread_engine(*core_, core_->max_in_flight,
                                     [read = std::move(read)](const ReadJob& job) { return read(job.key); });
}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard lock(core_->mu);
    core_->stopping = true;
    core_->queue.clear();
  }
  core_->ready.notify_all();
  core_->engine->stop();
}

std::unique_ptr<SampleReads> ReadAhead::start(const std::vector<uint64_t>& keys) {
  auto batch = std::make_shared<SampleReads::Batch>();
  batch->core = core_;
  batch->slots.resize(keys.size());
  bool more = false;
  {
    std::lock_guard lock(core_->mu);
    for (size_t i = 0; i < keys.size(); ++i) core_->queue.push_back(ReadJob{batch, i, keys[i]});
    more = core_->can_start();
  }
  if (more) core_->engine->wake();
  return std::unique_ptr<SampleReads>(new SampleReads(std::move(batch)));
}

int64_t ReadAhead::wanted_more() const {
  std::lock_guard lock(core_->mu);
  return core_->wanted_more();
}

uint64_t ReadAhead::held_bytes() const {
  std::lock_guard lock(core_->mu);
  return core_->held;
}

uint64_t ReadAhead::in_flight() const {
  std::lock_guard lock(core_->mu);
  return core_->in_flight;
}

uint64_t ReadAhead::most_in_flight() const {
  std::lock_guard lock(core_->mu);
  return core_->most_in_flight;
}

uint64_t ReadAhead::idle_wakeups() const {
  std::lock_guard lock(core_->mu);
  return core_->idle_wakeups;
}

IoEngine ReadAhead::engine() const { return core_->engine->kind(); }
int ReadAhead::threads() const { return core_->engine->threads(); }

}  // namespace tandem::data
