#include "tandem/data/sources/read_ahead.h"

#include <algorithm>
#include <thread>

#include "tandem/common/cpu_time.h"
#include "tandem/data/batching/thread_pool.h"

namespace tandem::data {

int io_threads_for(int requested) {
  if (requested >= 0) return requested;
  // The cores this process may run on (taskset, a cgroup's quota), not the machine's: a
  // worker given 4 of 16 cores makes a quarter of the images, and needs a quarter of the reads.
  return std::clamp(32 * available_cores(), 64, 1024);
}

// What the I/O threads and every batch's reads share: one lock for the slots of every
// batch and the bytes held (reads are milliseconds; the lock is held for nanoseconds).
// Two condition variables, so that a wake-up reaches only who can act on it: a taker
// waits on `ready` for a read in progress; an I/O task waits on `room` for the bytes held
// to fall under the limit. There can be a thousand I/O tasks waiting: waking them all at
// every sample taken (one variable, notify_all) kept a worker's cores busy switching
// between threads that went straight back to sleep (on 12 cores, batches of 256 500x375
// JPEGs, more than the limit in flight: 1,100 images/s instead of 6,000). Room is handed
// on one task at a time instead: a task that finds room starts its read and wakes the
// next while room is left.
struct ReadAhead::Core {
  std::mutex mu;
  std::condition_variable ready;  // a slot left kReading
  std::condition_variable room;   // bytes were given back, or the reads stop
  uint64_t held = 0;      // GUARDED_BY(mu): fetched, not yet taken
  bool stopping = false;  // GUARDED_BY(mu)
  uint64_t idle_wakeups = 0;  // GUARDED_BY(mu): I/O tasks woken that went back to waiting
};

namespace {

enum class SlotState { kQueued, kReading, kReady, kDone };

}  // namespace

struct SampleReads::Batch {
  struct Slot {
    SlotState state = SlotState::kQueued;
    Fetched fetched;
  };
  std::shared_ptr<ReadAhead::Core> core;
  std::vector<uint64_t> keys;
  std::vector<Slot> slots;  // GUARDED_BY(core->mu)
  bool abandoned = false;   // GUARDED_BY(core->mu): its SampleReads is gone
};

SampleReads::~SampleReads() {
  auto& core = *batch_->core;
  bool freed = false;
  {
    std::lock_guard lock(core.mu);
    batch_->abandoned = true;
    for (Batch::Slot& slot : batch_->slots) {
      if (slot.state != SlotState::kReady) continue;
      core.held -= slot.fetched.bytes.size();
      slot.fetched = {};
      slot.state = SlotState::kDone;
      freed = true;
    }
  }
  // This batch's tasks still waiting for room return when room reaches them (fetch).
  if (freed) core.room.notify_one();
}

std::optional<Fetched> SampleReads::take(size_t position) {
  auto& core = *batch_->core;
  std::unique_lock lock(core.mu);
  Batch::Slot& slot = batch_->slots.at(position);
  core.ready.wait(lock, [&] { return slot.state != SlotState::kReading; });
  const SlotState was = slot.state;
  slot.state = SlotState::kDone;
  std::optional<Fetched> out;
  if (was == SlotState::kReady) {
    core.held -= slot.fetched.bytes.size();
    out = std::move(slot.fetched);
    slot.fetched = {};
  }
  lock.unlock();
  // Bytes given back: room for one more read (which hands it on while room is left). A
  // slot taken over while queued needs no wake-up: its task returns when it runs.
  if (was == SlotState::kReady) core.room.notify_one();
  if (out) add_helper_cpu_seconds(out->cpu_seconds);  // the I/O thread worked for this one
  return out;
}

ReadAhead::ReadAhead(ReadAheadOptions opts, std::function<Fetched(uint64_t key)> read)
    : opts_(opts), read_(std::move(read)), core_(std::make_shared<Core>()) {}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard lock(core_->mu);
    core_->stopping = true;
  }
  core_->room.notify_all();
  core_->ready.notify_all();
  pool_.reset();  // queued tasks see `stopping` and return at once
}

uint64_t ReadAhead::held_bytes() const {
  std::lock_guard lock(core_->mu);
  return core_->held;
}

uint64_t ReadAhead::idle_wakeups() const {
  std::lock_guard lock(core_->mu);
  return core_->idle_wakeups;
}

std::unique_ptr<SampleReads> ReadAhead::start(const std::vector<uint64_t>& keys) {
  std::call_once(started_, [this] { pool_ = std::make_unique<ThreadPool>(std::max(1, opts_.io_threads)); });
  auto batch = std::make_shared<SampleReads::Batch>();
  batch->core = core_;
  batch->keys = keys;
  batch->slots.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    pool_->submit([this, batch, i] { fetch(batch, i); });
  }
  return std::unique_ptr<SampleReads>(new SampleReads(std::move(batch)));
}

// One I/O task: waits for room under the byte limit (unless the sample was taken over
// meanwhile), reads, and leaves the bytes in the slot, or drops them if no one will take them.
void ReadAhead::fetch(const std::shared_ptr<SampleReads::Batch>& batch, size_t position) {
  Core& core = *core_;
  {
    std::unique_lock lock(core.mu);
    auto& slot = batch->slots[position];
    const auto can_go = [&] {
      return core.stopping || batch->abandoned || slot.state != SlotState::kQueued || core.held < opts_.max_bytes;
    };
    while (!can_go()) {
      core.room.wait(lock);
      if (!can_go()) ++core.idle_wakeups;
    }
    const bool room_left = !core.stopping && core.held < opts_.max_bytes;
    const bool reads = !core.stopping && !batch->abandoned && slot.state == SlotState::kQueued;
    if (reads) slot.state = SlotState::kReading;
    lock.unlock();
    // Hand the room on: the next waiting task reads too (or, its slot taken or its batch
    // dropped, returns and hands it on in turn).
    if (room_left) core.room.notify_one();
    if (!reads) return;
  }
  Fetched fetched;
  const double cpu_start = thread_cpu_seconds();
  try {
    fetched = read_(batch->keys[position]);
  } catch (const std::exception& e) {  // an I/O task must not throw: the sample's maker reports it
    fetched.problem = e.what();
  }
  fetched.cpu_seconds = thread_cpu_seconds() - cpu_start;
  {
    std::lock_guard lock(core.mu);
    auto& slot = batch->slots[position];
    if (batch->abandoned) {
      slot.state = SlotState::kDone;
    } else {
      core.held += fetched.bytes.size();
      slot.fetched = std::move(fetched);
      slot.state = SlotState::kReady;
    }
  }
  core.ready.notify_all();  // the preprocessing threads (a few) waiting on a read in progress
}

}  // namespace tandem::data
