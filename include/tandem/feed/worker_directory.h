// Where a feed's data workers come from while it runs (issue 37): addresses named once
// (--workers host:port), a file re-read when it changes (--workers-watch FILE: one
// host:port a line, what a sidecar, a Slurm prolog or an operator writes), and DNS names
// re-resolved every few seconds (--worker-service, --workers dns:NAME: a Kubernetes
// headless Service, one address per ready pod). RankFeed asks current() on every poll,
// adds the workers that appeared and retires the ones that went. Plain logic: the
// resolver and the clock are the only outside things, and tests inject the resolver.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tandem/cluster/endpoint.h"
#include "tandem/cluster/options.h"
#include "tandem/common/clock.h"

namespace tandem::feed {

struct DirectoryOptions {
  std::vector<std::string> fixed;              // host:port, as given
  std::vector<cluster::WorkerService> names;   // re-resolved every resolve_every_s
  std::string watch_file;                      // "" = none
  double resolve_every_s = 5;
  double resolve_timeout_s = 2;                // each lookup, on the feed's watcher thread
  // Every address of a name (numeric). Default cluster::resolve_all.
  cluster::Resolver resolve;
};

// The options from the settings a trainer or tandem.Feed was given (--workers,
// --worker-service, --workers-watch, --worker-port).
DirectoryOptions directory_options(const std::vector<std::string>& workers, const std::string& service,
                                   const std::string& watch_file, const ClusterOptions& cluster);

// The host:port lines of a watch file: blank lines and # comments skipped, the port
// defaulting to `default_port`. Throws ConfigError naming the file, the line and the fix
// for a line that is not an address.
std::vector<std::string> read_watch_file(const std::string& path, int default_port);

class WorkerDirectory {
 public:
  // Reads the file and resolves the names once. Throws ConfigError when the watch file
  // cannot be read or holds a bad line (a run must start from a readable list).
  WorkerDirectory(DirectoryOptions opts, int default_port);

  // Whether the list can change while the run goes: a watch file or a name.
  bool changes() const { return !opts_.watch_file.empty() || !opts_.names.empty(); }

  // Every worker now, without repeats: the fixed ones, the file's (re-read when its size
  // or time changed) and each name's addresses (re-resolved when resolve_every_s passed).
  // A file that cannot be read or holds a bad line, or a name that does not resolve,
  // keeps its last answer (logged once per change): a glitch must not retire a pool. A
  // file that turns empty is believed on the second read (one rewritten in place may be
  // read half-written).
  std::vector<std::string> current(Clock::time_point now = Clock::now());

 private:
  void reread_file();
  void resolve_names(Clock::time_point now);

  DirectoryOptions opts_;
  int default_port_;
  std::vector<std::string> from_file_;
  std::string file_stamp_;       // size and time of the file last read
  std::string file_problem_;     // the last problem logged, so it is logged once
  bool empty_pending_ = false;   // the file read empty once: the next poll confirms it
  std::map<std::string, std::vector<std::string>> from_names_;  // name -> host:port
  Clock::time_point resolved_at_{};
};

}  // namespace tandem::feed
