#include "tandem/feed/rank_feed.h"

#include <algorithm>
#include <future>

#include <spdlog/spdlog.h>

#include "tandem/cluster/endpoint.h"
#include "tandem/common/clock.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/batching/convert.h"
#include "tandem/data/sources/file_dataset.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/local_source.h"
#include "tandem/feed/request_depth.h"
#include "tandem/transport/credentials.h"

namespace tandem::feed {
namespace {

// Each health check while waiting for the workers: short, so that every worker is tried
// often and a stop is seen soon.
constexpr double kHealthCheckS = 1;
constexpr size_t kParallelChecks = 64;

void check_rank(const FeedOptions& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world) {
    throw ConfigError("rank " + std::to_string(o.rank) + " of world " + std::to_string(o.world) +
                      " is impossible: use 0 <= rank < world (torchrun sets RANK and WORLD_SIZE)");
  }
}

void warn_if_open(const FeedOptions& o) {
  if (!o.security.token.empty()) return;
  if (std::none_of(o.workers.begin(), o.workers.end(), [](const std::string& t) { return !transport::is_loopback(t); })) {
    return;
  }
  spdlog::warn("THE DATA PLANE IS OPEN: no token is set, so anyone on the network can feed this process batches "
               "or stop its workers. Set TANDEM_TOKEN (or a token file) on every host of the job (docs/security.md)");
}

// Refuses a worker whose data differs from this feed's, naming how (`problem`; empty: none).
void check_serves(const transport::WorkerInfo& wi, const std::string& target, const std::string& problem) {
  if (problem.empty()) return;
  throw ConfigError("data worker " + target + " (" + wi.host + ") serves " + problem +
                    ": give every host the same data settings");
}

int release_all(std::vector<std::unique_ptr<transport::WorkerClient>> clients, const std::string& reason) {
  std::vector<std::future<bool>> calls;
  for (auto& c : clients) {
    calls.push_back(std::async(std::launch::async, [&client = *c, &reason] {
      const transport::CallStatus s = client.shutdown(reason, kReleaseDeadlineS);
      if (!s.ok()) spdlog::warn("could not tell data worker {} to shut down: {}", client.target(), s.message);
      return s.ok();
    }));
  }
  int acknowledged = 0;
  for (auto& c : calls) acknowledged += c.get() ? 1 : 0;
  return acknowledged;
}

}  // namespace

RankFeed::RankFeed(FeedOptions opts, const std::atomic<bool>& stop) : opts_(std::move(opts)), stop_(stop) {
  check_rank(opts_);
  learn_identities(opts_.workers);
  opts_.workers = distinct(opts_.workers);
  const bool python = data::source_kind(opts_.data.data).needs == data::SourceNeeds::kPythonFile;
  const bool skip_python = opts_.learn_python && python;  // tandem.Feed without local threads
  if (!opts_.workers.empty() &&
      (opts_.learn_any || skip_python || (opts_.may_learn && !data::dataset_is_here(opts_.data)))) {
    if (opts_.learn_any) {
      spdlog::info("no dataset named (data=): this feed learns the one its workers serve");
    } else if (skip_python) {
      spdlog::info("--data {}: this feed makes no samples itself and learns the dataset from its workers",
                   opts_.data.data);
    } else if (python) {
      spdlog::info("{} (of --data {}) is not on this host: it makes no samples itself and learns the dataset from "
                   "its workers", data::python_file_of(opts_.data), opts_.data.data);
    } else {
      spdlog::info("no copy of --data {} on this host: it preprocesses nothing and learns the dataset from its workers",
                   opts_.data.data);
    }
    info_ = learn_from_workers();
  } else {
    dataset_ = data::make_dataset(opts_.data, opts_.data_role);
    info_ = dataset_->info();
  }
  sampler_ = std::make_unique<data::Sampler>(info_.size, opts_.batch_size, opts_.data.seed, opts_.rank, opts_.world);
}

RankFeed::~RankFeed() { close(); }

std::unique_ptr<transport::WorkerClient> RankFeed::client_for(const std::string& target) const {
  auto client = opts_.connect ? opts_.connect(target)
                              : transport::make_worker_client(target, opts_.security, opts_.relay,
                                                              opts_.resolve ? opts_.resolve : cluster::resolve_all);
  client->set_job_ranks(opts_.world);  // the worker gives each of the job's ranks a stream
  return client;
}

bool RankFeed::stopped() const {
  std::lock_guard lock(mu_);
  return stop_ || interrupted_;
}

namespace {

// Which of `clients` not ready yet answer a health check now: asked at once, up to
// kParallelChecks at a time, so addresses nobody answers at cost one check's deadline
// together, not one each.
std::vector<bool> answering(const std::vector<std::unique_ptr<transport::WorkerClient>>& clients,
                            const std::vector<bool>& ready) {
  std::vector<bool> ok(clients.size(), false);
  for (size_t from = 0; from < clients.size(); from += kParallelChecks) {
    const size_t to = std::min(clients.size(), from + kParallelChecks);
    std::vector<std::future<bool>> checks;
    for (size_t i = from; i < to; ++i) {
      checks.push_back(ready[i] ? std::future<bool>()
                                : std::async(std::launch::async, [&c = *clients[i]] { return c.healthy(kHealthCheckS); }));
    }
    for (size_t i = from; i < to; ++i) {
      if (checks[i - from].valid()) ok[i] = checks[i - from].get();
    }
  }
  return ok;
}

}  // namespace

void RankFeed::reach(std::vector<std::unique_ptr<transport::WorkerClient>>& clients, std::vector<bool>& ready,
                     const std::function<void(size_t)>& on_ready, Enough enough) {
  const auto deadline = after(opts_.connect_timeout_s);
  for (;;) {
    if (stopped()) throw Interrupted("stopped while connecting to the data workers");
    const std::vector<bool> ok = answering(clients, ready);
    for (size_t i = 0; i < clients.size(); ++i) {
      if (stopped()) throw Interrupted("stopped while connecting to the data workers");
      if (ready[i] || !ok[i]) continue;
      on_ready(i);  // its answer is final: a refusal or another dataset ends the wait
      ready[i] = true;
      if (enough == Enough::kFirst) return;
    }
    if (enough == Enough::kOnePass || std::any_of(ready.begin(), ready.end(), [](bool r) { return r; })) return;
    if (stopped()) throw Interrupted("stopped while connecting to the data workers");
    if (Clock::now() > deadline) {
      throw NetworkError("no data worker answered within " + opts_.timeout_setting + " " +
                         std::to_string(static_cast<int>(opts_.connect_timeout_s)) + " s (" +
                         std::to_string(clients.size()) + " tried, e.g. " + clients.front()->target() +
                         "): check that they run and listen on that port, or raise " + opts_.timeout_setting);
    }
  }
}

data::DatasetInfo RankFeed::learn_from_workers() {
  std::vector<std::unique_ptr<transport::WorkerClient>> clients;
  for (const std::string& t : opts_.workers) clients.push_back(client_for(t));
  std::vector<bool> ready(clients.size(), false);
  std::optional<data::DatasetInfo> learnt;
  reach(
      clients, ready,
      [&](size_t i) {
        const transport::WorkerInfo wi = clients[i]->info(opts_.check_deadline_s);
        check_serves(wi, clients[i]->target(),
                     opts_.learn_any ? std::string()
                                     : data::describe_difference(wi.dataset.description, opts_.data, opts_.consumer));
        learnt = dataset_of(wi, clients[i]->target());
        spdlog::info("dataset learnt from data worker {} ({}): '{}' of {} samples, {} classes, fingerprint {}",
                     clients[i]->target(), wi.host, learnt->name, learnt->size, learnt->num_classes,
                     learnt->fingerprint);
      },
      Enough::kFirst);
  return *learnt;
}

void RankFeed::start(uint64_t steps, uint64_t start_step, int local_threads) {
  if (local_threads < 0) throw ConfigError("local threads must be 0 or more, got " + std::to_string(local_threads));
  if (local_threads > 0 && !dataset_) {
    throw ConfigError("local preprocessing threads need this host's copy of --data " + opts_.data.data +
                      ", which it does not have: give the host the data, or set --local-workers 0");
  }
  if (opts_.workers.empty() && local_threads == 0) {
    throw ConfigError("no data source: there are no data workers and no local preprocessing threads; "
                      "add data workers, or let this process preprocess (--local-workers, local_threads)");
  }
  if (start_step > steps) {
    throw ConfigError("start step " + std::to_string(start_step) + " is past the last step " + std::to_string(steps) +
                      ": resume at a step before the last");
  }
  {
    std::lock_guard lock(mu_);
    SchedulerOptions so{steps, opts_.prefetch, opts_.batch_timeout_s, start_step, opts_.data.require_deterministic,
                        opts_.directory && opts_.directory->changes()};
    so.max_prefetch = max_prefetch(opts_.prefetch, info_.sample_bytes() * static_cast<uint64_t>(opts_.batch_size));
    scheduler_ = std::make_unique<Scheduler>([s = sampler_.get()](uint64_t seq) { return s->request(seq); }, so);
    if (interrupted_) scheduler_->close();
  }
  local_threads_ = local_threads;
  connect_workers();
  if (local_threads > 0) {
    local_ = std::make_unique<LocalSource>(*scheduler_, dataset_, local_threads, data::wire_dtype(opts_.data));
  }
}

void RankFeed::connect_workers() {
  // Workers the directory does not list (an instance group's) stay for the whole run.
  std::vector<std::string> kept = opts_.workers;
  if (opts_.directory) {
    const std::vector<std::string> listed = opts_.directory->current();
    learn_identities(listed);
    std::set<std::string> ids;
    for (const std::string& w : listed) ids.insert(identity(w));
    std::erase_if(kept, [&](const std::string& w) { return ids.count(identity(w)) > 0; });
  }
  link_workers();
  if (opts_.directory && opts_.directory->changes()) {
    watcher_ = std::thread([this, kept] { watch_directory(kept); });
  }
}

void RankFeed::link_workers() {
  if (opts_.workers.empty()) return;
  warn_if_open(opts_);
  std::vector<std::unique_ptr<transport::WorkerClient>> clients;
  for (const std::string& t : opts_.workers) clients.push_back(client_for(t));
  std::vector<bool> ready(clients.size(), false);
  std::vector<int> threads(clients.size(), 0);
  reach(
      clients, ready,
      [&](size_t i) {
        const transport::WorkerInfo wi = clients[i]->info(std::min(opts_.check_deadline_s, opts_.connect_timeout_s));
        check_serves(wi, clients[i]->target(), identity_problem(wi, info_, opts_.consumer));
        threads[i] = static_cast<int>(wi.threads);
        spdlog::info("data worker {} ({}) ready: {}", clients[i]->target(), wi.host, counted(wi.threads, "thread"));
      },
      // This process makes batches too: it need not wait for a worker.
      local_threads_ > 0 ? Enough::kOnePass : Enough::kAny);
  std::lock_guard lock(links_mu_);
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!ready[i]) {
      spdlog::warn("data worker {} does not answer yet: the feed starts without it, it joins when it does",
                   clients[i]->target());
    }
    add_link(std::move(clients[i]), /*absent=*/!ready[i]);
    links_.back()->set_threads(threads[i]);
  }
}

void RankFeed::add_link(std::unique_ptr<transport::WorkerClient> client, bool absent) {
  LinkOptions link;
  link.inflight = opts_.inflight;
  const std::string id = identity(client->target());
  links_.push_back(std::make_unique<WorkerLink>(std::move(client), *scheduler_, info_, link));
  by_identity_[id] = links_.back().get();
  links_.back()->start(absent);
}

void RankFeed::watch_directory(std::vector<std::string> kept) {
  std::unique_lock lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, seconds(opts_.directory_every_s), [&] { return watch_stop_; })) {
    lock.unlock();
    try {
      reconcile(opts_.directory->current(), kept);
    } catch (const std::exception& e) {  // the directory keeps its last list; so does the feed
      spdlog::warn("reading the data workers' list: {}", e.what());
    }
    lock.lock();
  }
}

std::optional<data::Batch> RankFeed::next() { return scheduler_->next(); }

void RankFeed::interrupt() {
  std::lock_guard lock(mu_);
  interrupted_ = true;
  if (scheduler_) scheduler_->close();
}

void RankFeed::close() {
  {
    std::lock_guard lock(mu_);
    if (scheduler_) scheduler_->close();
  }
  {
    std::lock_guard lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  // The sources' threads use the scheduler: they stop before it goes.
  for (auto& link : links_) link->stop();
  local_.reset();
}

int RankFeed::release_workers(const std::string& reason) const {
  // The workers named at start, and every one that joined since and is still listed.
  std::vector<std::string> targets = opts_.workers;
  {
    std::lock_guard lock(links_mu_);
    for (const auto& link : links_) {
      if (!link->leaving()) targets.push_back(link->target());
    }
  }
  targets = distinct(targets);
  std::vector<std::unique_ptr<transport::WorkerClient>> clients;
  for (const std::string& t : targets) clients.push_back(client_for(t));
  return release_all(std::move(clients), reason);
}

int release_workers(const std::vector<std::string>& targets, const SecurityOptions& security,
                    const std::string& reason) {
  std::vector<std::unique_ptr<transport::WorkerClient>> clients;
  for (const std::string& t : targets) clients.push_back(transport::make_worker_client(t, security));
  return release_all(std::move(clients), reason);
}

}  // namespace tandem::feed
