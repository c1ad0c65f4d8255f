// The Python processes of --data python:FILE:NAME (process_pool.h): started, leased one
// per sample, restarted when they die or hang. Their messages: pool_channel.h.
#include "tandem/data/python/process_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pool_channel.h"
#include "pool_process.h"
#include "tandem/common/clock.h"
#include "tandem/common/cpu_time.h"
#include "tandem/common/hash.h"
#include "tandem/common/text.h"

namespace tandem::data {
namespace fs = std::filesystem;
using pool::ProcessGone;
using pool::ProcessSlow;
// --- the pool ------------------------------------------------------------------------------

namespace {

size_t shm_limit(const PythonPoolOptions& opts) { return opts.max_shm_bytes ? opts.max_shm_bytes : kMaxShmBytes; }

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / double(1 << 20)); }

}  // namespace

PythonProcessPool::PythonProcessPool(PythonPoolOptions opts) : opts_(std::move(opts)) {
  opts_.initial_shm_bytes = std::min(opts_.initial_shm_bytes, shm_limit(opts_));
  const int now = opts_.start_procs > 0 ? std::min(opts_.start_procs, opts_.procs) : opts_.procs;
  std::vector<Process*> started;
  for (int i = 0; i < opts_.procs; ++i) {
    procs_.push_back(std::make_unique<Process>());
    if (i < now) {  // the others start in run() when first leased, or in start_rest()
      procs_.back()->start(opts_);
      started.push_back(procs_.back().get());
    }
  }
  build_in(started);
}

void PythonProcessPool::start_rest() {
  std::lock_guard lock(mu_);
  std::vector<Process*> started;
  for (auto& p : procs_) {
    if (p->pid > 0 || p->busy) continue;
    p->start(opts_);
    started.push_back(p.get());
  }
  build_in(started);
}

// Waits (opts_.start_timeout_s) until each of `started` has built the dataset; the first
// of the pool's processes also says what the dataset is (about_).
void PythonProcessPool::build_in(const std::vector<Process*>& started) {
  const std::string what = "python:" + opts_.file + ":" + opts_.name;
  const auto deadline = after(opts_.start_timeout_s);
  for (Process* p : started) {
    const bool first = p == procs_.front().get();
    nlohmann::json reply;
    try {
      pool::send_message(p->channel, pool::init_request(opts_, shm_limit(opts_), first), deadline);
      reply = pool::receive_message(p->channel, deadline);
    } catch (const ProcessGone& e) {
      throw ConfigError("the Python process for " + what + " ended while starting (" + reap(p->pid, after(1)) +
                        "; " + e.why + "): run `" + opts_.python + " -c 'import numpy'` to check the interpreter");
    } catch (const ProcessSlow&) {
      throw ConfigError("the Python process for " + what + " did not build the dataset within " +
                        std::to_string(static_cast<int>(opts_.start_timeout_s)) + " s: make its __init__ faster");
    }
    if (!reply.value("ok", false)) {
      throw ConfigError("cannot build the dataset " + what + ": " + pool::python_error(reply));
    }
    if (!first) continue;  // the first says what the dataset is; the others build the same
    try {
      about_ = pool::about_of(reply);
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError("the Python process for " + what + " answered its start oddly (" + std::string(e.what()) +
                        "): is " + opts_.script + " from this tandem?");
    }
  }
}

PythonProcessPool::~PythonProcessPool() {
  for (auto& p : procs_) p->close_all();  // all at once: each sees EOF; then ~Process reaps it
}

std::vector<pid_t> PythonProcessPool::pids() const {
  std::lock_guard lock(mu_);
  std::vector<pid_t> out;
  for (const auto& p : procs_) {
    if (p->pid > 0) out.push_back(p->pid);
  }
  return out;
}


// Holds one process for one sample; gives it back however the sample ends.
class PythonProcessPool::Lease {
 public:
  explicit Lease(const PythonProcessPool& pool, int which = -1) : pool_(pool), p_(pool.acquire(which)) {}
  ~Lease() { pool_.release(p_); }
  Process& operator*() const { return p_; }

 private:
  const PythonProcessPool& pool_;
  Process& p_;
};

PythonProcessPool::Process& PythonProcessPool::acquire(int which) const {
  std::unique_lock lock(mu_);
  ++waiting_;
  // Each process ahead of us may take a whole sample, or a restart.
  const double budget = opts_.start_timeout_s + opts_.sample_timeout_s * (1.0 + double(waiting_) / procs_.size());
  const auto deadline = after(budget);
  Process* found = nullptr;
  const bool ok = freed_.wait_until(lock, deadline, [&] {
    if (which >= 0) {  // that one
      Process& p = *procs_.at(static_cast<size_t>(which));
      found = p.busy ? nullptr : &p;
      return found != nullptr;
    }
    for (auto& p : procs_) {  // a started process before one not yet started
      if (!p->busy && (!found || (found->pid <= 0 && p->pid > 0))) found = p.get();
    }
    return found != nullptr;
  });
  --waiting_;
  if (!ok) {
    throw DataError("no Python process of " + opts_.file + " became free within " +
                    std::to_string(static_cast<int>(budget)) + " s: raise --python-procs or --sample-timeout");
  }
  found->busy = true;
  return *found;
}

void PythonProcessPool::release(Process& p) const {
  {
    std::lock_guard lock(mu_);
    p.busy = false;
  }
  freed_.notify_all();  // a waiter for this very process (acquire(which)) among them
}

void PythonProcessPool::restart(Process& p) const {
  if (p.pid > 0) ::kill(-p.pid, SIGKILL);
  p.stop(0);
  p.start(opts_);
  const auto deadline = after(opts_.start_timeout_s);
  nlohmann::json reply;
  try {
    pool::send_message(p.channel, pool::init_request(opts_, shm_limit(opts_)), deadline);
    reply = pool::receive_message(p.channel, deadline);
  } catch (const ProcessGone& e) {
    throw DataError("a restarted Python process of " + opts_.file + " ended while starting: " + e.why);
  } catch (const ProcessSlow&) {
    throw DataError("a restarted Python process of " + opts_.file + " did not start within " +
                    std::to_string(static_cast<int>(opts_.start_timeout_s)) + " s");
  }
  if (!reply.value("ok", false)) throw DataError("a restarted Python process failed: " + pool::python_error(reply));
}

namespace {

// One hash of a sample's fields: names, dtypes, shapes, bytes and values.
uint64_t digest_of(const SampleFields& fields) {
  uint64_t h = kFnvOffset;
  for (const auto& [name, f] : fields) {
    h = fnv1a(name + "\t" + f.dtype, h);
    if (f.shape) {
      for (const int64_t d : *f.shape) h = fnv1a(std::to_string(d) + ",", h);
    }
    h = fnv1a(std::string_view(reinterpret_cast<const char*>(f.bytes.data()), f.bytes.size()), h);
    h = fnv1a(std::to_string(f.integer) + "/" + fmt::format("{}", f.real), h);
  }
  return h;
}

}  // namespace

std::optional<uint64_t> PythonProcessPool::digest_in(int which, const Probe& probe) const {
  Lease lease(*this, which);
  Process& p = *lease;
  const bool call = opts_.kind == PythonPoolOptions::Kind::kFunction;
  try {
    if (p.pid <= 0) restart(p);
    const auto deadline = after(opts_.sample_timeout_s);
    if (call && !probe.input.empty()) {
      p.grow(probe.input.size());
      std::memcpy(p.map, probe.input.data(), probe.input.size());
    }
    pool::send_message(p.channel,
                       call ? pool::call_request(probe.index, probe.seed, probe.shape, probe.input.size())
                            : pool::get_request(probe.index, probe.seed),
                       deadline);
    const nlohmann::json reply = pool::receive_message(p.channel, deadline);
    if (!reply.value("ok", false)) return std::nullopt;
    return digest_of(p.fields_of(reply));
  } catch (const ProcessGone&) {
  } catch (const ProcessSlow&) {
  } catch (const nlohmann::json::exception&) {
  }
  try {
    restart(p);  // a process that died or hung here is replaced before anyone else leases it
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::vector<uint64_t> PythonProcessPool::unrepeatable(const std::vector<Probe>& probes) const {
  std::vector<uint64_t> out;
  const int other = procs_.size() > 1 ? 1 : 0;
  for (const Probe& probe : probes) {
    const auto first = digest_in(0, probe), again = digest_in(0, probe);
    const auto elsewhere = digest_in(other, probe);
    if (!first || !again || !elsewhere) continue;
    if (*first != *again || *first != *elsewhere) out.push_back(probe.index);
  }
  return out;
}

std::string PythonProcessPool::describe(uint64_t index) const {
  if (opts_.kind == PythonPoolOptions::Kind::kFunction) {
    return "sample " + std::to_string(index) + " in --pipeline step python(" + opts_.file + ":" + opts_.name + ")";
  }
  return "sample " + std::to_string(index) + " of python:" + opts_.file + ":" + opts_.name;
}

namespace {

std::string too_big(const std::string& which, size_t needed, const PythonPoolOptions& opts) {
  return which + " needs " + mib(needed) + " of shared memory, more than the " + mib(shm_limit(opts)) +
         " each of its " + std::to_string(opts.procs) + " Python processes may use (" + opts.shm_limit_setting +
         "): raise it, or lower --python-procs";
}

}  // namespace

void PythonProcessPool::run(uint64_t index, uint64_t seed, const std::function<void(const SampleFields&)>& use) const {
  serve(index, pool::get_request(index, seed), {}, use);
}

void PythonProcessPool::make_alone(Process& p, size_t n, const ManyUse& use, const std::string& why) const {
  spdlog::warn("{} making {} samples of {} at once failed ({}): restarting it, and making them one by one",
               p.pid > 0 ? fmt::format("the Python process {}", p.pid) : std::string("a Python process"), n, opts_.file,
               why);
  try {
    restart(p);  // before anyone else leases it
  } catch (...) {  // the next lease restarts it again, or says why it cannot
    p.pid = -1;
  }
  for (size_t i = 0; i < n; ++i) use(i, nullptr, "");
}

namespace {

void say_many_hung(double timeout_s, size_t samples) {
  spdlog::warn("a Python process took over --sample-timeout {} s for one step of a request of {} samples: they are "
               "made alone, and from now on each sample is asked for by itself (__getitems__, if the dataset has "
               "one, is no longer used)",
               timeout_s, samples);
}

}  // namespace

void PythonProcessPool::run_many(const std::vector<std::pair<uint64_t, uint64_t>>& items, const ManyUse& use) const {
  Lease lease(*this);
  Process& p = *lease;
  nlohmann::json reply;
  try {
    if (p.pid <= 0) restart(p);
    pool::send_message(p.channel, pool::many_request(items, !batched_hung_), after(opts_.sample_timeout_s));
    // Each sample has its own --sample-timeout: the wait goes on while the process moves
    // on (pool_channel.h), and ends when one step (a sample, or __getitems__ of n) took longer.
    auto [made, samples] = p.progress();
    for (auto since = Clock::now(); !pool::wait_message(p.channel, after(0.25));) {
      const auto [now, next] = p.progress();
      if (now != made) {
        made = now;
        samples = next;
        since = Clock::now();
      } else if (seconds_since(since) > opts_.sample_timeout_s * static_cast<double>(samples)) {
        throw ProcessSlow{};
      }
    }
    reply = pool::receive_message(p.channel, after(opts_.sample_timeout_s));
  } catch (const ProcessGone& e) {  // died: each alone says why, retried as run() retries
    const std::string how = reap(p.pid, after(1));
    p.pid = -1;
    return make_alone(p, items.size(), use, how + "; " + e.why);
  } catch (const ProcessSlow&) {  // hung: each alone meets its own --sample-timeout
    if (!batched_hung_.exchange(true)) say_many_hung(opts_.sample_timeout_s, items.size());
    return make_alone(p, items.size(), use, "no reply in time");
  } catch (const std::exception& e) {  // it did not restart
    return make_alone(p, items.size(), use, e.what());
  }
  if (const auto cpu = reply.find("cpu"); cpu != reply.end() && cpu->is_number()) {
    add_helper_cpu_seconds(cpu->get<double>());
  }
  const nlohmann::json* samples = reply.contains("samples") && reply["samples"].is_array() ? &reply["samples"] : nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    const nlohmann::json* sample = samples && i < samples->size() ? &(*samples)[i] : nullptr;
    if (!sample || !sample->is_object()) {
      use(i, nullptr, "");
      continue;
    }
    if (!sample->value("ok", false)) {
      use(i, nullptr, describe(items[i].first) + " raised " + pool::python_error(*sample));
      continue;
    }
    SampleFields fields;
    try {
      const size_t size = reply.value("shm_size", size_t{0});
      if (size > p.mapped) p.remap(size);
      fields = pool::fields_of(*sample, p.map, p.mapped);
    } catch (...) {  // a bad reply (ProcessGone, json): made alone, it is named
      use(i, nullptr, "");
      continue;
    }
    use(i, &fields, "");
  }
}

void PythonProcessPool::call(uint64_t index, uint64_t seed, std::span<const uint8_t> input,
                             const std::vector<int64_t>& shape, const std::function<void(const SampleFields&)>& use) const {
  if (input.size() > shm_limit(opts_)) throw PythonSampleError(too_big(describe(index), input.size(), opts_));
  serve(index, pool::call_request(index, seed, shape, input.size()), input, use);
}

void PythonProcessPool::serve(uint64_t index, const nlohmann::json& request, std::span<const uint8_t> input,
                              const std::function<void(const SampleFields&)>& use) const {
  std::string first_death;
  for (int attempt = 0;; ++attempt) {
    Lease lease(*this);
    Process& p = *lease;
    if (p.pid <= 0) restart(p);  // a restart that failed before, or one not started yet
    nlohmann::json reply;
    try {
      const auto deadline = after(opts_.sample_timeout_s);
      if (!input.empty()) {
        p.grow(input.size());
        std::memcpy(p.map, input.data(), input.size());
      }
      pool::send_message(p.channel, request, deadline);
      reply = pool::receive_message(p.channel, deadline);
    } catch (const ProcessSlow&) {
      spdlog::warn("{} took over {} s (--sample-timeout): killing its Python process {}", describe(index),
                   opts_.sample_timeout_s, p.pid);
      restart(p);
      throw PythonSampleError(describe(index) + fmt::format(" took over {} s", opts_.sample_timeout_s) +
                              ", and its process was killed: make it faster, or raise --sample-timeout");
    } catch (const ProcessGone& e) {
      const std::string how = reap(p.pid, after(1));
      spdlog::warn("the Python process {} making {} died ({}; {}): restarting it", p.pid, describe(index), how, e.why);
      p.pid = -1;
      restart(p);
      if (attempt == 0) {
        first_death = how;
        continue;
      }
      throw PythonSampleError(describe(index) + " killed its Python process twice (" + first_death + ", then " + how +
                              "): fix the crash, e.g. in a C extension, or check for the out-of-memory killer");
    }
    // The process's CPU for this request counts as the batch's (common/cpu_time.h).
    if (const auto cpu = reply.find("cpu"); cpu != reply.end() && cpu->is_number()) {
      add_helper_cpu_seconds(cpu->get<double>());
    }
    if (!reply.value("ok", false) && reply.contains("shm_needed")) {
      throw PythonSampleError(too_big(describe(index), reply.value("shm_needed", size_t{0}), opts_));
    }
    if (!reply.value("ok", false)) throw PythonSampleError(describe(index) + " raised " + pool::python_error(reply));
    SampleFields fields;
    try {
      fields = p.fields_of(reply);
    } catch (const ProcessGone& e) {
      throw PythonSampleError(describe(index) + ": its process sent a bad reply (" + e.why + ")");
    } catch (const nlohmann::json::exception& e) {
      throw PythonSampleError(describe(index) + ": its process sent a bad reply (" + std::string(e.what()) + ")");
    }
    use(fields);
    return;
  }
}

}  // namespace tandem::data
