#include "tandem/data/sources/read_ahead.h"

#include <algorithm>
#include <thread>

#include "tandem/data/batching/thread_pool.h"

namespace tandem::data {

int io_threads_for(int requested) {
  if (requested >= 0) return requested;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(32 * cores, 64, 1024);
}

// What the I/O threads and every batch's reads share: one lock for the slots of every
// batch and the bytes held (reads are milliseconds; the lock is held for nanoseconds).
struct ReadAhead::Core {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t held = 0;      // GUARDED_BY(mu): fetched, not yet taken
  bool stopping = false;  // GUARDED_BY(mu)
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
  {
    std::lock_guard lock(core.mu);
    batch_->abandoned = true;
    for (Batch::Slot& slot : batch_->slots) {
      if (slot.state != SlotState::kReady) continue;
      core.held -= slot.fetched.bytes.size();
      slot.fetched = {};
      slot.state = SlotState::kDone;
    }
  }
  core.cv.notify_all();
}

std::optional<Fetched> SampleReads::take(size_t position) {
  auto& core = *batch_->core;
  std::unique_lock lock(core.mu);
  Batch::Slot& slot = batch_->slots.at(position);
  core.cv.wait(lock, [&] { return slot.state != SlotState::kReading; });
  const SlotState was = slot.state;
  slot.state = SlotState::kDone;
  std::optional<Fetched> out;
  if (was == SlotState::kReady) {
    core.held -= slot.fetched.bytes.size();
    out = std::move(slot.fetched);
    slot.fetched = {};
  }
  lock.unlock();
  if (was != SlotState::kDone) core.cv.notify_all();  // bytes freed, or an I/O task waiting on this slot
  return out;
}

ReadAhead::ReadAhead(ReadAheadOptions opts, std::function<Fetched(uint64_t key)> read)
    : opts_(opts), read_(std::move(read)), core_(std::make_shared<Core>()) {}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard lock(core_->mu);
    core_->stopping = true;
  }
  core_->cv.notify_all();
  pool_.reset();  // queued tasks see `stopping` and return at once
}

uint64_t ReadAhead::held_bytes() const {
  std::lock_guard lock(core_->mu);
  return core_->held;
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
    core.cv.wait(lock, [&] {
      return core.stopping || batch->abandoned || slot.state != SlotState::kQueued || core.held < opts_.max_bytes;
    });
    if (core.stopping || batch->abandoned || slot.state != SlotState::kQueued) return;
    slot.state = SlotState::kReading;
  }
  Fetched fetched;
  try {
    fetched = read_(batch->keys[position]);
  } catch (const std::exception& e) {  // an I/O task must not throw: the sample's maker reports it
    fetched.problem = e.what();
  }
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
  core.cv.notify_all();
}

}  // namespace tandem::data
