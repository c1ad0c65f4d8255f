#include "tandem/transport/shared_maker.h"

#include <cstring>
#include <iterator>
#include <stdexcept>
#include <limits>
#include <string_view>

#include "tandem/common/hash.h"
#include "tandem/data/batching/batch_maker.h"

namespace tandem::transport {
namespace {

constexpr uint64_t kPrivate = uint64_t{1} << 63;  // keys of requests nobody shares

data::Buffer copy_of(const data::Buffer& from) {
  data::Buffer to(from.size());
  if (from.size() > 0) std::memcpy(to.data(), from.data(), from.size());
  return to;
}

}  // namespace

data::Batch copy_batch(const data::Batch& b, uint64_t sequence) {
  data::Batch c;
  c.sequence = sequence;
  c.epoch = b.epoch;
  c.shape = b.shape;
  c.dtype = b.dtype;
  c.labels = b.labels;
  c.indices = b.indices;
  c.data = copy_of(b.data);
  for (const data::Field& f : b.fields) {
    data::Field g;
    g.name = f.name;
    g.dtype = f.dtype;
    g.shape = f.shape;
    g.lengths = f.lengths;
    g.data = copy_of(f.data);
    c.fields.push_back(std::move(g));
  }
  c.reads_wanted = b.reads_wanted;
  c.digest = b.digest;
  c.compute_seconds = 0;  // made once, for the job that asked first
  return c;
}

SharedMaker::SharedMaker(SharedMakerOptions opts) : opts_(opts) {}

SharedMaker::~SharedMaker() = default;

uint64_t SharedMaker::key_of(const data::BatchMaker& maker, const data::BatchRequest& r) {
  uint64_t h = fnv1a(maker.dataset().info().fingerprint);
  h = fnv1a(std::string_view(reinterpret_cast<const char*>(&r.epoch), sizeof r.epoch), h);
  h = fnv1a(std::string_view(reinterpret_cast<const char*>(r.indices.data()), r.indices.size() * sizeof(uint64_t)), h);
  return h & ~kPrivate;
}

SharedMaker::Entry* SharedMaker::find(uint64_t key, const data::BatchMaker& maker, const data::BatchRequest& r) {
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.maker != &maker || it->second.epoch != r.epoch ||
      it->second.indices != r.indices) {
    return nullptr;
  }
  return &it->second;
}

void SharedMaker::make(const std::string& job, double weight, data::BatchMaker& maker, data::BatchRequest request,
                       Done done, Failed fail) {
  std::shared_ptr<const data::Batch> ready;
  const uint64_t sequence = request.sequence;
  {
    std::lock_guard lock(mu_);
    JobTally& t = tallies_[job];
    t.weight = weight;
    const bool shares = opts_.window_bytes > 0;
    uint64_t key = shares ? key_of(maker, request) : kPrivate | next_private_++;
    Entry* e = shares ? find(key, maker, request) : nullptr;
    if (shares && !e && entries_.count(key)) key = kPrivate | next_private_++;  // a hash collision: not shared
    if (e && e->made) {
      ready = e->batch;
      ++t.batches;
      t.samples_served += request.indices.size();
      t.samples_shared += request.indices.size();
    } else if (e) {
      e->waiters.push_back({job, sequence, std::move(done), std::move(fail)});
      return;
    } else {
      Entry& n = entries_[key];
      n.maker = &maker;
      n.epoch = request.epoch;
      n.indices = request.indices;
      n.waiters.push_back({job, sequence, std::move(done), std::move(fail)});
      if (queues_[job].empty()) start_waiting(job);
      queues_[job].push_back({key, &maker, std::move(request)});
    }
  }
  if (ready) {
    done(copy_batch(*ready, sequence));
    return;
  }
  dispatch();
}

// A job that starts waiting starts at the least virtual time of those waiting (or of all,
// when none waits): what it did not ask for while away is not owed to it.
void SharedMaker::start_waiting(const std::string& job) {
  double least = std::numeric_limits<double>::infinity();
  for (const auto& [other, queue] : queues_) {
    if (other != job && !queue.empty()) least = std::min(least, shares_[other].vtime);
  }
  if (least == std::numeric_limits<double>::infinity()) {
    for (const auto& [other, share] : shares_) {
      if (other != job) least = std::min(least, share.vtime);
    }
  }
  Share& mine = shares_[job];
  if (least != std::numeric_limits<double>::infinity()) mine.vtime = std::max(mine.vtime, least);
}

// Charges `job` for a batch: at its start its estimate, at its end the difference to
// what it took (`seconds` < 0: the start).
void SharedMaker::charge(const std::string& job, uint64_t key, double seconds, uint64_t samples) {
  Share& s = shares_[job];
  const double weight = tallies_[job].weight;
  if (seconds < 0) {
    const double estimate = s.per_sample * static_cast<double>(samples);
    s.charged[key] = estimate;
    s.vtime += estimate / weight;
    return;
  }
  const auto it = s.charged.find(key);
  const double before = it == s.charged.end() ? 0 : it->second;
  if (it != s.charged.end()) s.charged.erase(it);
  s.vtime += (seconds - before) / weight;
  const JobTally& t = tallies_[job];
  if (t.samples_made > 0) s.per_sample = (t.compute_seconds + seconds) / static_cast<double>(t.samples_made);
}

// The waiting job with the least virtual time.
const std::string* SharedMaker::next_job() const {
  const std::string* best = nullptr;
  double least = std::numeric_limits<double>::infinity();
  for (const auto& [job, queue] : queues_) {
    if (queue.empty()) continue;
    const double vtime = shares_.at(job).vtime;
    if (vtime < least) {
      least = vtime;
      best = &job;
    }
  }
  return best;
}

void SharedMaker::dispatch() {
  for (;;) {
    Pending next;
    {
      std::lock_guard lock(mu_);
      if (in_maker_ >= opts_.in_flight || stopped_) return;
      const std::string* job = next_job();
      if (!job) return;
      std::deque<Pending>& q = queues_[*job];
      next = std::move(q.front());
      q.pop_front();
      tallies_[*job].samples_made += next.request.indices.size();
      charge(*job, next.key, -1, next.request.indices.size());
      ++in_maker_;
    }
    const uint64_t key = next.key;
    try {
      next.maker->make_async(
          std::move(next.request), [this, key](data::Batch b) { finished(key, std::move(b)); },
          [this, key](std::exception_ptr e) { failed(key, std::move(e)); });
    } catch (...) {
      failed(key, std::current_exception());
    }
  }
}

void SharedMaker::keep(uint64_t key) {
  kept_.push_back(key);
  kept_bytes_ += entries_[key].batch->payload_bytes();
  while (kept_bytes_ > opts_.window_bytes && !kept_.empty()) {
    const auto it = entries_.find(kept_.front());
    kept_.pop_front();
    if (it == entries_.end()) continue;
    kept_bytes_ -= it->second.batch->payload_bytes();
    entries_.erase(it);
  }
}

void SharedMaker::finished(uint64_t key, data::Batch batch) {
  std::vector<Waiter> waiters;
  std::shared_ptr<const data::Batch> kept;
  {
    std::lock_guard lock(mu_);
    --in_maker_;
    Entry& e = entries_[key];
    waiters.swap(e.waiters);
    for (size_t i = 0; i < waiters.size(); ++i) {
      JobTally& t = tallies_[waiters[i].job];
      ++t.batches;
      t.samples_served += batch.indices.size();
      if (i == 0) {
        charge(waiters[i].job, key, batch.compute_seconds, batch.indices.size());
        t.compute_seconds += batch.compute_seconds;
      } else {
        t.samples_shared += batch.indices.size();
      }
    }
    if ((key & kPrivate) == 0 && opts_.window_bytes > 0) {
      e.made = true;
      e.batch = kept = std::make_shared<const data::Batch>(copy_batch(batch, batch.sequence));
      keep(key);
    } else {
      entries_.erase(key);
    }
  }
  for (size_t i = 1; i < waiters.size(); ++i) waiters[i].done(copy_batch(batch, waiters[i].sequence));
  if (!waiters.empty()) {
    batch.sequence = waiters[0].sequence;
    waiters[0].done(std::move(batch));
  }
  dispatch();
}

void SharedMaker::failed(uint64_t key, std::exception_ptr e) {
  std::vector<Waiter> waiters;
  {
    std::lock_guard lock(mu_);
    --in_maker_;
    waiters.swap(entries_[key].waiters);
    entries_.erase(key);
    if (!waiters.empty()) charge(waiters[0].job, key, 0, 0);  // its estimate back
  }
  for (Waiter& w : waiters) w.failed(e);
  dispatch();
}

void SharedMaker::stop() {
  std::vector<Waiter> waiters;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    for (auto& [job, queue] : queues_) {
      for (Pending& p : queue) {
        auto& w = entries_[p.key].waiters;
        std::move(w.begin(), w.end(), std::back_inserter(waiters));
        entries_.erase(p.key);
      }
      queue.clear();
    }
  }
  const auto e = std::make_exception_ptr(std::runtime_error("the data worker is stopping"));
  for (Waiter& w : waiters) w.failed(e);
}

std::map<std::string, JobTally> SharedMaker::tallies() const {
  std::lock_guard lock(mu_);
  return tallies_;
}

uint64_t SharedMaker::window_batches() const {
  std::lock_guard lock(mu_);
  return kept_.size();
}

}  // namespace tandem::transport
