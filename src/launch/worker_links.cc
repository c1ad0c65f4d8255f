#include "worker_links.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/transport/credentials.h"

namespace tandem::launch {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point connect_deadline(const TrainerOptions& opts) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.connect_timeout_s));
}

[[noreturn]] void none_answered(const TrainerOptions& opts, size_t tried, const std::string& example) {
  throw NetworkError("no data worker answered within --connect-timeout " +
                     std::to_string(static_cast<int>(opts.connect_timeout_s)) + " s (" + std::to_string(tried) +
                     " tried, e.g. " + example + "): check that they run and listen on that port, or raise --connect-timeout");
}

}  // namespace

data::DatasetInfo learn_dataset_from_workers(const std::vector<std::string>& targets, const Settings& settings,
                                             const std::atomic<bool>& stop) {
  std::vector<std::unique_ptr<transport::RemoteWorker>> workers;
  for (const std::string& t : targets) workers.push_back(std::make_unique<transport::RemoteWorker>(t, settings.security));
  const auto deadline = connect_deadline(settings.trainer);
  for (;;) {
    for (auto& w : workers) {
      try {
        w->wait_ready(1.0, &stop);
      } catch (const NetworkError&) {
        continue;
      }
      return w->learn_dataset(10);
    }
    if (Clock::now() > deadline) none_answered(settings.trainer, workers.size(), targets.front());
  }
}

std::vector<report::WorkerFacts> ask_workers(nlohmann::json& summary, const data::Dataset* local,
                                             const std::vector<std::unique_ptr<transport::RemoteWorker>>& workers,
                                             const cluster::Cluster& cluster) {
  nlohmann::json files = local ? local->skipped() : std::vector<std::string>{};
  uint64_t count = local ? local->skipped_count() : 0;
  std::vector<report::WorkerFacts> facts;
  std::vector<std::future<transport::WorkerInfo>> answers;
  for (const auto& w : workers) {
    answers.push_back(std::async(std::launch::async, [&worker = *w] { return worker.info(kReleaseDeadlineS); }));
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    report::WorkerFacts f{workers[i]->target(), "", "", 0};
    try {
      const transport::WorkerInfo wi = answers[i].get();
      for (const auto& s : wi.skipped) files.push_back(wi.host + ": " + s);
      count += wi.skipped_count;
      f.host = wi.host;
      f.threads = wi.threads;
      for (const auto& g : cluster.groups) {
        if (std::find(g.hosts.begin(), g.hosts.end(), wi.host) != g.hosts.end()) f.instance_type = g.instance_type;
      }
    } catch (const std::exception& e) {
      spdlog::warn("could not ask {} which samples it skipped: {}", workers[i]->target(), e.what());
    }
    facts.push_back(std::move(f));
  }
  summary["skipped_samples"] = count;
  summary["skipped_files"] = files;
  return facts;
}

void release_workers(const std::vector<std::string>& targets, const SecurityOptions& security,
                     const std::string& reason) {
  std::vector<std::thread> calls;
  for (const std::string& target : targets) {
    calls.emplace_back([&, target] { transport::RemoteWorker(target, security).shutdown(reason, kReleaseDeadlineS); });
  }
  for (auto& t : calls) t.join();
}

}  // namespace tandem::launch
