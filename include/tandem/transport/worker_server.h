// A data worker: serves augmented batches over gRPC (tandem.v1.DataService), as fast as
// its cores allow. The gRPC types stay inside the .cc.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "tandem/data/core/dataset.h"
#include "tandem/transport/data_worker.h"
#include "tandem/transport/options.h"
#include "tandem/transport/shared_maker.h"

namespace tandem::transport {

// kUnclaimed: no trainer of its job called within --claim-timeout of the start.
enum class StopReason { kShutdownRpc, kIdle, kStopped, kUnclaimed };

class WorkerServer {
 public:
  // `host` names this worker in logs and in its Info reply; batches travel as `wire`.
  // Every RPC but the health check must pass `security` (credentials.h). A pool
  // (opts.pool_jobs) makes the datasets of its jobs with settings of their own with
  // `dataset_for`, each job's at the start (a ConfigError there stops it) and any job's
  // added to its file later, at its first call.
  WorkerServer(std::shared_ptr<const data::Dataset> dataset, const WorkerOptions& opts, std::string host,
               data::DType wire = data::DType::kFloat32, SecurityOptions security = {},
               DatasetFor dataset_for = {});
  ~WorkerServer();
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  // Binds `address` (e.g. "0.0.0.0:6000"; port 0 picks a free port, so tests can bind
  // anywhere) and starts serving. Returns the bound port. Throws NetworkError if it
  // cannot bind.
  int start(const std::string& address);

  // Blocks until a Shutdown RPC, the idle timeout (no trainer spoke for
  // opts.idle_timeout_s and no stream is open), or stop(); then shuts the server down,
  // giving open streams a short grace. Returns why it stopped.
  StopReason wait();

  // Makes wait() return kStopped. Thread-safe; not async-signal-safe.
  void stop();

  // Makes wait() return kStopped once no stream is open, or after `grace_s` at the
  // latest: on SIGTERM a worker lets a connected trainer finish its step and checkpoint.
  void stop_when_idle(double grace_s);

  // Leaves the job politely (--drain): every stream, open or opened later, is told that
  // this worker is leaving (`why`), so its trainer sends nothing more; what was accepted
  // is answered; wait() returns kStopped once no stream is open, or after `grace_s`.
  void drain(double grace_s, const std::string& why);

  int threads() const;

  // What --metrics-port shows. Thread-safe.
  struct Stats {
    int open_streams = 0;
    int threads = 0;
    uint64_t batches_served = 0;
    uint64_t samples_served = 0;
    bool leaving = false;  // drain() was called
    std::map<std::string, JobTally> jobs;  // a pool's, per job (--pool-jobs)
  };
  Stats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::transport
