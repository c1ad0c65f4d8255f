// RankFeed's links to its workers while the feed runs: one link per worker, whatever it is
// called (its identity: cluster::worker_identity), reconciled with the directory's list.
#include <algorithm>
#include <future>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "tandem/cluster/endpoint.h"
#include "tandem/feed/rank_feed.h"

namespace tandem::feed {
namespace {

// Each lookup of a worker's name to tell whether two names are one worker: one that does
// not answer this soon is known by its name. At most this many at once.
constexpr double kIdentityLookupS = 2;
constexpr size_t kParallelLookups = 64;

}  // namespace

void RankFeed::learn_identities(const std::vector<std::string>& targets) {
  std::vector<std::string> unknown;
  {
    std::lock_guard lock(ids_mu_);
    for (const std::string& t : targets) {
      if (!identity_of_.count(t) && std::find(unknown.begin(), unknown.end(), t) == unknown.end()) unknown.push_back(t);
    }
  }
  // A fake worker's name (tests inject `connect`) is not looked up unless they inject `resolve` too.
  const cluster::Resolver resolve = opts_.resolve ? cluster::Resolver(opts_.resolve)
                                    : opts_.connect ? cluster::Resolver() : cluster::Resolver(cluster::resolve_all);
  for (size_t from = 0; from < unknown.size(); from += kParallelLookups) {
    std::vector<std::future<std::string>> found;
    for (size_t i = from; i < std::min(unknown.size(), from + kParallelLookups); ++i) {
      found.push_back(std::async(std::launch::async, [&, t = unknown[i]] {
        return cluster::worker_identity(t, resolve, kIdentityLookupS);
      }));
    }
    std::lock_guard lock(ids_mu_);
    for (size_t i = 0; i < found.size(); ++i) identity_of_.emplace(unknown[from + i], found[i].get());
  }
}

std::string RankFeed::identity(const std::string& target) const {
  std::lock_guard lock(ids_mu_);
  const auto it = identity_of_.find(target);
  return it == identity_of_.end() ? target : it->second;
}

std::vector<std::string> RankFeed::distinct(const std::vector<std::string>& targets) const {
  std::vector<std::string> out;
  std::map<std::string, std::string> seen;  // identity -> the first spelling
  for (const std::string& t : targets) {
    const std::string id = identity(t);
    if (const auto [it, first] = seen.emplace(id, t); !first) {
      if (t != it->second) spdlog::info("data worker {} is {} ({}): one worker, one link", t, it->second, id);
      continue;
    }
    out.push_back(t);
  }
  return out;
}

void RankFeed::reconcile(const std::vector<std::string>& listed, const std::vector<std::string>& kept) {
  learn_identities(listed);  // before the lock: names are looked up
  std::set<std::string> wanted;
  for (const std::string& t : listed) wanted.insert(identity(t));
  for (const std::string& t : kept) wanted.insert(identity(t));
  std::lock_guard lock(links_mu_);
  if (stopped()) return;
  std::vector<WorkerLink*> dropped;
  for (const auto& [id, link] : by_identity_) {
    if (wanted.count(id)) continue;
    if (link->leaving()) delisted_.insert(id);  // listed again later: it rejoins
    else dropped.push_back(link);
  }
  // New ones first, so that the pool is never empty in between.
  for (const std::string& t : listed) {
    const std::string id = identity(t);
    const auto it = by_identity_.find(id);
    if (it == by_identity_.end()) {
      spdlog::info("data worker {} listed: it joins once it answers serving this dataset", t);
      add_link(client_for(t), /*absent=*/true);
      continue;
    }
    // One that left because the list dropped it is listed again: the same link takes it
    // back once it has answered what it held (until then, a later poll does).
    WorkerLink& link = *it->second;
    if (delisted_.count(id) && link.leaving() && link.finished()) {
      spdlog::info("data worker {} listed again: it rejoins once it answers serving this dataset", link.target());
      delisted_.erase(id);
      link.rejoin();
    }
  }
  for (WorkerLink* link : dropped) {
    link->leave("no longer listed (--workers-watch, --worker-service)");
    delisted_.insert(identity(link->target()));
  }
}

}  // namespace tandem::feed
