#include "tandem/launch/feed_settings.h"

#include <algorithm>
#include <memory>

#include "tandem/feed/worker_directory.h"

namespace tandem::launch {

feed::FeedOptions feed_options(const Settings& settings, std::vector<std::string> workers, int rank, int world) {
  const TrainerOptions& t = settings.trainer;
  feed::FeedOptions o;
  o.data = settings.data;
  o.workers = std::move(workers);
  o.worker_port = settings.cluster.worker_port;
  o.security = settings.security;
  o.relay = settings.launcher.stream_relay;
  o.rank = rank;
  o.world = world;
  o.batch_size = t.batch_size;
  o.prefetch = t.prefetch;
  o.inflight = t.inflight;
  o.connect_timeout_s = t.connect_timeout_s;
  o.batch_timeout_s = t.batch_timeout_s;
  // A Python dataset here starts one process (to learn the schema); the local threads
  // start the rest as they first need them, so the host's cores stay with training.
  o.data_role.python_start_procs = 1;
  feed::DirectoryOptions d = feed::directory_options(t.workers, t.worker_service, t.workers_watch, settings.cluster);
  if (!d.watch_file.empty() || !d.names.empty()) {
    d.resolve_timeout_s = std::min(settings.cluster.resolve_timeout_s, 5.0);
    o.directory = std::make_shared<feed::WorkerDirectory>(std::move(d), settings.cluster.worker_port);
    for (const std::string& w : o.directory->current()) {
      if (std::find(o.workers.begin(), o.workers.end(), w) == o.workers.end()) o.workers.push_back(w);
    }
  }
  return o;
}

}  // namespace tandem::launch
