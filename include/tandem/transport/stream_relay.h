// A trainer host's ranks share one batch stream to each data worker (`--share-streams`):
// each rank streams to its host's relay over a Unix socket, naming the worker it wants
// in `tandem-upstream` (make_worker_client's `relay`); the relay holds one stream per
// worker for all of them, renumbers their requests into it, and hands each batch back to
// the rank that asked, passing its bytes on in the slices they arrived in. A worker then
// serves one stream per trainer host instead of one per rank: a job of 1,024 GPUs on 128
// hosts opens 128 streams per worker, not 1,024.
//
// Only StreamBatches goes through the relay. Health, Info and Shutdown still go straight
// to the worker, and the worker checks the relay's stream (token, job) as any other.
// The relay keeps no batch: what a worker answers goes to the rank that asked, or is
// dropped when that rank's stream has ended (its feed asks again elsewhere, as when a
// direct stream breaks). A worker's stream that ends ends every rank's stream through it,
// with the same kind of status (transient: the ranks retry; final: they are told why),
// and a worker's notice that it leaves reaches every rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/transport/options.h"


namespace tandem::transport {

struct StreamRelayOptions {
  // Listens on unix:socket_path; "" = relay.sock in a directory of its own under the
  // temporary directory ($TMPDIR), which only this user may enter, removed with the relay.
  std::string socket_path;
  SecurityOptions security;  // the job's token and TLS: what its streams to workers carry,
                             // and the token it asks of the ranks
  // A rank whose worker ended its stream cleanly (drained) gets this long to end its own
  // before the relay cuts it.
  double end_wait_s = 10;
  // A worker's stream that no rank has used for this long ends (a delisted worker's, the
  // end of a feed); until then a rank that opens its stream again finds it open.
  double linger_s = 5;
};

class StreamRelay {
 public:
  // Listens. Throws ConfigError when it cannot make its directory, NetworkError when it
  // cannot listen.
  explicit StreamRelay(StreamRelayOptions opts);
  ~StreamRelay();  // ends every stream and joins its threads
  StreamRelay(const StreamRelay&) = delete;
  StreamRelay& operator=(const StreamRelay&) = delete;

  // "unix:PATH", for make_worker_client.
  std::string address() const;

  struct Stats {
    int worker_streams = 0;  // streams to workers open now
    int rank_streams = 0;    // ranks' streams open now
    uint64_t batches = 0;    // batches handed to ranks
    int worker_streams_peak = 0;  // most streams to workers open at once
  };
  Stats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::transport
