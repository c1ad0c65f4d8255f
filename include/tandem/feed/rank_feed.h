// The one owner of a data-parallel rank's feed (tf.data's DataServiceClient): it finds
// the dataset (this host's copy, or the description its workers give), builds the
// sampler's slice of every global batch and the Scheduler, connects to every data
// worker (feed::WorkerLink over a transport::WorkerClient) and starts this process's own
// preprocessing threads (LocalSource), and ends them all in the one safe order. The
// trainer role and the Python module both use it; nothing else assembles a feed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tandem/data/batching/sampler.h"
#include "tandem/data/core/batch.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/core/options.h"
#include "tandem/feed/scheduler.h"
#include "tandem/feed/worker_directory.h"
#include "tandem/feed/worker_link.h"
#include "tandem/transport/options.h"
#include "tandem/transport/worker_client.h"

namespace tandem::feed {

class LocalSource;

// The deadline of the calls that end a run (Shutdown, the last Info): a healthy worker
// answers in milliseconds, and all are asked at once, so a hung worker costs one of these.
inline constexpr double kReleaseDeadlineS = 3;

struct FeedOptions {
  DataOptions data;                   // what the feed serves (made here when this host has a copy)
  DataRole data_role;                 // what a dataset made here is allowed
  std::vector<std::string> workers;   // data workers, "address:port"
  int worker_port = 6000;             // where a worker named without a port listens (--worker-port)
  SecurityOptions security;           // the token and job name every call carries
  // This host's stream relay ("unix:PATH", set by `tandem launch --share-streams`): the
  // batch streams go through it (transport/stream_relay.h); "" = straight to each worker.
  std::string relay;
  int rank = 0;                       // this rank's slice of every global batch
  int world = 1;                      // ranks sharing each global batch
  int batch_size = 32;                // samples per rank per step
  int prefetch = 16;                  // batches requested ahead of the consumer
  int inflight = 4;                   // requests outstanding per worker
  double connect_timeout_s = 180;     // no source at all after this long is an error
  double batch_timeout_s = 120;       // a wait for one batch gives up after this long
  double check_deadline_s = 9;        // the Info call that checks a worker's dataset
  // With no copy of the data on this host: learn the dataset from the first worker that
  // answers (a SageMaker channel given to the data group only) instead of failing.
  bool may_learn = true;
  // Learn a python:FILE:NAME dataset from the workers even where FILE is here, instead of
  // starting Python processes only to read its schema: a feed that makes no samples
  // itself (tandem.Feed without local_threads). Needs workers.
  bool learn_python = false;
  // No dataset was named (tandem.Feed without data=): learn whatever the workers serve,
  // as the trainer does without a copy of the data, rather than the default (synthetic).
  // Needs workers.
  bool learn_any = false;
  // How the user names the connect timeout, for the error that says to raise it.
  std::string timeout_setting = "--connect-timeout";
  // How errors name this side when a worker serves other data ("this feed expects ...").
  std::string consumer = "this trainer";
  // Where workers come and go while the feed runs (--workers-watch, DNS names); null: the
  // workers are fixed. Workers it lists join (checked like any); ones it stops listing
  // leave (WorkerLink::leave); workers it never listed (an instance group's) stay.
  std::shared_ptr<WorkerDirectory> directory;
  double directory_every_s = 1;  // how often it is asked
  // Test-only: how a worker is reached (default: gRPC, transport::make_worker_client).
  std::function<std::unique_ptr<transport::WorkerClient>(const std::string& target)> connect;
  // How a worker named by its host name is looked up, again at each try to reach it
  // (transport::make_worker_client's `resolve`). Default: cluster::resolve_all.
  transport::NameResolver resolve;
};

class RankFeed {
 public:
  // Finds the dataset: this host's copy of opts.data when it has one, else (opts.may_learn
  // and workers given; or opts.learn_python for a Python dataset) the description of the
  // first worker that answers, waiting up to opts.connect_timeout_s, checked against the
  // settings opts.data fixes without the files (data::describe_difference); then builds
  // this rank's sampler. Throws ConfigError for settings that cannot work (a bad rank,
  // no data here and nobody to learn from, a worker whose settings differ, naming them),
  // NetworkError when no worker answered,
  // PeerError for an unusable description, Interrupted as soon as `stop` is set.
  // `stop` outlives this.
  RankFeed(FeedOptions opts, const std::atomic<bool>& stop);
  ~RankFeed();  // close()
  RankFeed(const RankFeed&) = delete;
  RankFeed& operator=(const RankFeed&) = delete;

  const data::DatasetInfo& info() const { return info_; }
  // This host's copy of the dataset; null when the dataset was learnt from a worker.
  const data::Dataset* local_dataset() const { return dataset_.get(); }
  const FeedOptions& options() const { return opts_; }

  // Starts delivering sequences [start_step, steps): builds the scheduler,
  // connects to every worker and checks each serves info() (returns once one source can
  // serve: a worker that answered, or at once with local threads; a worker that does not
  // answer yet joins when it does), and starts `local_threads` threads of this process.
  // Throws NetworkError when no worker answered within the connect timeout or one
  // refused this job, ConfigError when one serves another dataset or there is no source,
  // Interrupted on `stop` or interrupt(). REQUIRES: called once.
  void start(uint64_t steps, uint64_t start_step, int local_threads);

  // The next batch in sequence order, or nullopt after the last one or once interrupted.
  // Throws NetworkError when every source failed or --batch-timeout passed.
  // REQUIRES: start() returned.
  std::optional<data::Batch> next();

  // Ends a wait in next() or start() at once; safe from any thread (a signal watcher).
  void interrupt();

  // Stops every source and joins its threads (the scheduler closes first, so nobody
  // waits on it; the sources, whose threads use it, then stop). Idempotent. Statistics
  // stay readable.
  void close();

  const data::Sampler& sampler() const { return *sampler_; }
  // Where the run's steps meet the data (a resumed run's checkpoint place: DataAnchor).
  // REQUIRES: before start(). Throws ConfigError for a place past the dataset's end.
  void anchor(const data::DataAnchor& a) { sampler_->anchor(a); }
  // REQUIRES: start() was called.
  const Scheduler& scheduler() const { return *scheduler_; }
  // Every worker link so far, one per worker however many names it was listed under,
  // those that left included. REQUIRES: close() was called, or
  // the feed has no directory (links are added while it runs).
  const std::vector<std::unique_ptr<WorkerLink>>& workers() const { return links_; }
  int local_threads() const { return local_threads_; }

  // Tells every worker of opts.workers that the job is over (Shutdown with `reason`),
  // all at once, each call bounded by kReleaseDeadlineS. Returns how many acknowledged.
  int release_workers(const std::string& reason) const;

 private:
  std::unique_ptr<transport::WorkerClient> client_for(const std::string& target) const;
  data::DatasetInfo learn_from_workers();
  // When reach() may stop: after the first worker answered; after one pass over all;
  // once any answered (after a whole pass, so all that answer at once join at once).
  enum class Enough { kFirst, kOnePass, kAny };
  // Health-checks the workers not yet `ready`, pass after pass, calling on_ready(i) for
  // each that answers (it may throw: a refusal or another dataset ends the wait), until
  // `enough`. Throws NetworkError after the connect timeout, Interrupted on a stop.
  void reach(std::vector<std::unique_ptr<transport::WorkerClient>>& clients, std::vector<bool>& ready,
             const std::function<void(size_t)>& on_ready, Enough enough);
  void connect_workers();
  void link_workers();  // opts_.workers, once each answered or the first pass ended
  // A link to the client's worker, started; `absent`: it joins once it answers.
  // REQUIRES: links_mu_.
  void add_link(std::unique_ptr<transport::WorkerClient> client, bool absent);
  // Learns the identity (cluster::worker_identity) of each target not seen before, names
  // looked up at once, each for a moment at most. A spelling keeps the identity it was
  // first given, so a worker followed by its name is not taken for a new one.
  void learn_identities(const std::vector<std::string>& targets);
  std::string identity(const std::string& target) const;  // learnt, or the target itself
  // `targets` less any that names a worker named before it (one link per worker).
  std::vector<std::string> distinct(const std::vector<std::string>& targets) const;
  // The directory's thread: every directory_every_s, workers listed anew join and
  // workers no longer listed leave, until close().
  void watch_directory(std::vector<std::string> kept);
  void reconcile(const std::vector<std::string>& listed, const std::vector<std::string>& kept);
  bool stopped() const;

  FeedOptions opts_;
  const std::atomic<bool>& stop_;
  std::shared_ptr<const data::Dataset> dataset_;
  data::DatasetInfo info_;
  std::unique_ptr<data::Sampler> sampler_;
  std::unique_ptr<Scheduler> scheduler_;
  mutable std::mutex ids_mu_;
  std::map<std::string, std::string> identity_of_;  // GUARDED_BY(ids_mu_): target -> identity
  mutable std::mutex links_mu_;  // guards links_, by_identity_ and delisted_ while the directory's thread adds to them
  std::set<std::string> delisted_;  // identities whose link left because the list dropped them
  std::vector<std::unique_ptr<WorkerLink>> links_;  // one per worker (identity), in the order they came
  std::map<std::string, WorkerLink*> by_identity_;
  std::thread watcher_;                 // watch_directory()
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;             // GUARDED_BY(watch_mu_)
  std::unique_ptr<LocalSource> local_;
  int local_threads_ = 0;
  mutable std::mutex mu_;        // guards the scheduler's creation against interrupt()
  bool interrupted_ = false;     // GUARDED_BY(mu_)
};

// Tells every worker in `targets` that the job is over, all at once, each call bounded by
// kReleaseDeadlineS. For a run that ends before it has a feed. Returns how many acknowledged.
int release_workers(const std::vector<std::string>& targets, const SecurityOptions& security,
                    const std::string& reason);

}  // namespace tandem::feed
