// A rank's feed options from the whole program's settings: the one place that knows
// which settings the feed reads (its own FeedOptions, feed/rank_feed.h).
#pragma once

#include <string>
#include <vector>

#include "tandem/feed/rank_feed.h"
#include "tandem/launch/settings.h"

namespace tandem::launch {

// A feed's options from the settings, filled once: --data and its settings, --worker-port,
// the token and job name, the trainer's batch size, prefetch, inflight and timeouts, and
// the workers of --workers-watch / --worker-service (a directory) after `workers`.
feed::FeedOptions feed_options(const Settings& settings, std::vector<std::string> workers, int rank, int world);

}  // namespace tandem::launch
