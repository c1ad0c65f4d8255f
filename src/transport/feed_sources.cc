#include "tandem/transport/feed_sources.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/feed/local_source.h"
#include "tandem/transport/credentials.h"

namespace tandem::transport {

using Clock = std::chrono::steady_clock;

FeedSources::FeedSources(const data::Sampler& sampler, const feed::SchedulerOptions& opts)
    : scheduler_(std::make_unique<feed::Scheduler>([&sampler](uint64_t seq) { return sampler.request(seq); }, opts)) {}

FeedSources::~FeedSources() { close(); }

void FeedSources::connect_workers(const std::vector<std::string>& targets, const SecurityOptions& security,
                                  const data::DatasetInfo& info, const ConnectOptions& opts,
                                  const std::atomic<bool>& stop) {
  if (targets.empty()) return;
  if (security.token.empty() &&
      std::any_of(targets.begin(), targets.end(), [](const std::string& t) { return !is_loopback(t); })) {
    spdlog::warn("THE DATA PLANE IS OPEN: no token is set, so anyone on the network can feed this process batches "
                 "or stop its workers. Set TANDEM_TOKEN (or a token file) on every host of the job (docs/security.md)");
  }
  std::vector<std::unique_ptr<RemoteWorker>> workers;
  for (const std::string& t : targets) workers.push_back(std::make_unique<RemoteWorker>(t, security));
  std::vector<bool> ready(workers.size(), false);
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.timeout_s));
  const auto all = [&] { return std::all_of(ready.begin(), ready.end(), [](bool r) { return r; }); };
  const auto any = [&] { return std::any_of(ready.begin(), ready.end(), [](bool r) { return r; }); };
  for (;;) {
    for (size_t i = 0; i < workers.size(); ++i) {
      if (ready[i]) continue;
      try {
        workers[i]->wait_ready(1.0, &stop);  // Interrupted on a stop
      } catch (const NetworkError&) {
        continue;
      }
      // Its answer is final: a refusal (token, job) or another dataset ends the connect.
      workers[i]->check_serves(info, std::min(opts.check_deadline_s, opts.timeout_s));
      ready[i] = true;
    }
    if (all() || any() || opts.local) break;
    if (stop) throw Interrupted("stopped while connecting to the data workers");
    if (Clock::now() > deadline) {
      throw NetworkError("no data worker answered within " + opts.timeout_setting + " " +
                         std::to_string(static_cast<int>(opts.timeout_s)) + " s (" + std::to_string(workers.size()) +
                         " tried, e.g. " + targets.front() + "): check that they run and listen on that port, or " +
                         "raise " + opts.timeout_setting);
    }
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    if (!ready[i]) {
      spdlog::warn("data worker {} does not answer yet: the feed starts without it, it joins when it does",
                   workers[i]->target());
    }
    workers[i]->start(*scheduler_, scheduler_->add_source(workers[i]->target(), opts.inflight), &info, !ready[i]);
    workers_.push_back(std::move(workers[i]));
  }
}

void FeedSources::start_local(std::shared_ptr<const data::Dataset> dataset, int threads, data::DType wire) {
  local_ = std::make_unique<feed::LocalSource>(*scheduler_, std::move(dataset), threads, wire);
}

void FeedSources::close() {
  scheduler_->close();
  // The sources' threads use the scheduler: they stop before it goes.
  for (auto& w : workers_) w->stop();
  local_.reset();
}

}  // namespace tandem::transport
