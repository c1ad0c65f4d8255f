// The trainer's calls to one data worker, and nothing else: Health, Info, Shutdown and
// StreamBatches, the mirror of DataWorker / WorkerServer on the worker side (tf.data's
// worker_client). What to do when a call fails (retry, rejoin, drop the worker) is the
// feed's policy (feed::WorkerLink), which takes a WorkerClient so that it can be tested
// with a fake one.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/data/core/batch.h"
#include "tandem/transport/options.h"
#include "tandem/transport/worker_info.h"

namespace tandem::transport {

// How a call ended. kTransient: a retry may cure it (the worker restarted, the network
// glitched, the worker was busy). kFinal: the same call would fail again (a wrong token,
// another job, a request it cannot serve).
struct CallStatus {
  enum class Kind { kOk, kTransient, kFinal };
  Kind kind = Kind::kOk;
  std::string message;  // e.g. "gRPC UNAVAILABLE: ...", the peer's words made printable
  bool ok() const { return kind == Kind::kOk; }
};

// One StreamBatches call. One thread writes requests while another reads batches;
// cancel() may come from any thread.
class BatchCall {
 public:
  virtual ~BatchCall() = default;
  // Sends a request. False once the stream is broken (finish() then says why).
  virtual bool write(const data::BatchRequest& request) = 0;
  // No more requests will be written.
  virtual void writes_done() = 0;
  // The next batch in completion order, or nullopt once the stream has ended. Throws
  // PeerError for a malformed message or a request the worker refused in-band.
  virtual std::optional<data::Batch> read() = 0;
  // Ends the call at once: a blocked read() or write() returns.
  virtual void cancel() = 0;
  // How the call ended. REQUIRES: read() returned nullopt.
  virtual CallStatus finish() = 0;

  // `f(why)` runs on the reading thread, inside read(), when the worker says it is
  // leaving (drained: --drain): it answers the requests it holds and then ends the
  // stream, so send it nothing more. Set before the first read().
  void on_leaving(std::function<void(const std::string& why)> f) { on_leaving_ = std::move(f); }

 protected:
  void leaving(const std::string& why) {
    if (on_leaving_) on_leaving_(why);
  }

 private:
  std::function<void(const std::string&)> on_leaving_;
};

class WorkerClient {
 public:
  virtual ~WorkerClient() = default;
  // "address:port", as given.
  virtual const std::string& target() const = 0;
  // One health check, bounded by `timeout_s`: true when the worker answers SERVING. When
  // false, `why` (if given) says what happened instead.
  virtual bool healthy(double timeout_s, std::string* why = nullptr) = 0;
  // What the worker serves, bounded by `timeout_s`. Throws NetworkError when the call
  // fails (a refusal included: the message says which), PeerError for an answer that
  // cannot be read.
  virtual WorkerInfo info(double timeout_s) = 0;
  // Asks the worker to exit, bounded by `timeout_s`.
  virtual CallStatus shutdown(const std::string& reason, double timeout_s) = 0;
  // Opens a StreamBatches call.
  virtual std::unique_ptr<BatchCall> stream() = 0;

  // The job's ranks (its world size), which each stream tells the worker: a worker
  // admits that many streams of its job beyond its --max-streams, so every rank of a
  // large job is served (DataWorker::open_stream).
  void set_job_ranks(int ranks) { job_ranks_ = ranks; }
  int job_ranks() const { return job_ranks_; }

 private:
  int job_ranks_ = 1;
};

// Every address of a host name, waiting at most timeout_s; throws Error when it has none
// (cluster::resolve_all).
using NameResolver = std::function<std::vector<std::string>(const std::string& host, double timeout_s)>;

// A client over gRPC for `target` ("address:port"), with its own connection. Every call
// carries `security`'s token and job name, over TLS when it names a CA. Connects lazily:
// constructing one never waits. `relay` ("unix:PATH"): this host's stream relay
// (stream_relay.h), through which its batch streams go; "" = straight to the worker.
// `resolve`, for a target whose host is a name: the name is looked up again at every
// health check (each try to take a worker back), and the client dials whatever it
// answers now, so a worker that comes back under its name at a new address (a pod
// recreated) is found there, and one whose name does not resolve yet is only not
// healthy (the feed keeps trying it while the others serve). Null: gRPC resolves the
// name itself.
std::unique_ptr<WorkerClient> make_worker_client(const std::string& target, const SecurityOptions& security,
                                                 const std::string& relay = "", NameResolver resolve = nullptr);

}  // namespace tandem::transport
