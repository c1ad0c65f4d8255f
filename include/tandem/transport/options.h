// The data plane's settings: who may speak to a data worker (SecurityOptions) and the
// worker's server (WorkerOptions). Filled by the command line (launch/settings.h); see
// docs/configuration.md and docs/security.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// Who may speak to a data worker (docs/security.md). Trainers and workers of one job
// must agree.
struct SecurityOptions {
  // --token (prefer --token-file or env TANDEM_TOKEN: flags show in `ps`): every RPC
  // carries it as `authorization: Bearer TOKEN`; workers refuse calls without it.
  // Empty = the data plane is open (tandem says so loudly outside loopback).
  std::string token;
  std::string token_file;  // --token-file: read the token from this file
  // --job-name: the job a worker belongs to; it refuses trainers of another job. Default:
  // SageMaker's TRAINING_JOB_NAME, else Slurm's SLURM_JOB_ID, else none.
  std::string job;
  // TLS (all PEM files): a worker serves with --tls-cert/--tls-key and, given --tls-ca,
  // requires clients to present a certificate signed by it; a trainer verifies workers
  // against --tls-ca and presents --tls-cert/--tls-key when given.
  std::string tls_cert, tls_key, tls_ca;
  std::string tls_server_name;  // --tls-server-name: the name workers' certificates carry, if not their address
};

// A data worker's server.
struct WorkerOptions {
  int port = -1;              // --port: -1 (unset) = ClusterOptions::worker_port; 0 = a free port, logged
  std::string bind = "0.0.0.0";
  int threads = 0;            // --threads: preprocessing threads; 0 = all cores
  double idle_timeout_s = 600;  // --idle-timeout: exit when no trainer speaks for this long
  // --claim-timeout: exit (5) when no trainer of its job has called at all this long
  // after the start (a trainer that failed first, wrong --workers or token); 0 = never.
  double claim_timeout_s = 300;
  // Limits that keep a worker alive whatever its clients send (RESOURCE_EXHAUSTED names
  // the limit): samples in one request, open streams, and bytes of batches accepted but
  // not yet sent, across every stream (0 = a quarter of the memory available at start).
  int max_request_samples = 65536;  // --max-request-samples
  int max_streams = 64;             // --max-streams
  // --max-connections: TCP connections open at once (one more is closed at once); 0 = a
  // quarter of the open-files limit, 16 to 16384 (transport::default_max_connections).
  int max_connections = 0;
  int64_t max_inflight_mb = 0;      // --max-inflight-mb
  // --term-grace: after SIGTERM, keep serving connected trainers this long at most (they
  // are stopping too, and need their batches to reach a checkpoint).
  double term_grace_s = 30;
  // --drain: SIGTERM makes this worker leave its job politely (a spot notice, a scale-in):
  // it tells its trainers, which send it nothing more, answers what it accepted (within
  // --term-grace) and exits 0. Without it, SIGTERM means the whole job is stopping.
  bool drain = false;
  // --pool-jobs FILE: serve several jobs at once and after one another, each admitted by
  // its own token from FILE (re-read when it changes: a job taken out is revoked), its
  // streams apart from the others', the cores shared by weight, identical requests made
  // once (docs/security.md, "A pool for several jobs"). "" = one job's worker.
  std::string pool_jobs;
  // --share-window-mb: a pool's made batches kept for other jobs' identical requests.
  int64_t share_window_mb = 512;
  // --emulate-slowdown K: for simulations only, behave like a core K times slower (each
  // batch chunk is followed by a sleep of K-1 times its CPU time, reported as compute).
  double emulate_slowdown = 1;
};

}  // namespace tandem
