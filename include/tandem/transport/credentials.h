// Who may speak to a data worker, in one place: the job token carried as gRPC metadata
// (`authorization: Bearer TOKEN`), the job name (`tandem-job`), and optional TLS. Both
// sides of every RPC go through these functions. See docs/security.md.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "tandem/transport/options.h"
#include "tandem/transport/pool_jobs.h"


namespace grpc {
class ChannelCredentials;
class ClientContext;
class ServerContext;
class ServerCredentials;
class Status;
}  // namespace grpc

namespace tandem::transport {

// TLS when the settings name a certificate (server) or a CA (client), else insecure.
// Throws ConfigError naming a PEM file that cannot be read.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const SecurityOptions& s);
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const SecurityOptions& s);

// Adds the token and the job name to an outgoing call.
void authorise(grpc::ClientContext& ctx, const SecurityOptions& s);

// The job a data worker belongs to: its --job-name or, for a worker started without one,
// the job of the first trainer that opens a stream to it (a job's trainers all carry the
// same name, or none). Until then it belongs to no job and answers any caller with the
// token, Shutdown included: there is no other job yet to protect. Thread-safe.
class WorkerJob {
 public:
  explicit WorkerJob(std::string named);  // empty: belongs to no job until claimed

  // OK when a caller of job `caller` (its `tandem-job`; empty for a trainer without one)
  // may call: this worker is `caller`'s, or no job's yet. With `claim` (opening a
  // stream), a worker of no job becomes `caller`'s. Else PERMISSION_DENIED naming both
  // jobs and the fix.
  grpc::Status admit(const std::string& caller, bool claim);

 private:
  std::mutex mu_;
  std::optional<std::string> job_;  // GUARDED_BY(mu_): none = claimable
  const bool named_;                // by --job-name (else claimed by a stream)
};

// OK when the caller carries this worker's token s.token (compared in constant time) and
// `job` admits it (WorkerJob::admit, claiming it when `claim`); else UNAUTHENTICATED or
// PERMISSION_DENIED with a message that says which and what to do.
grpc::Status check_caller(const grpc::ServerContext& ctx, const SecurityOptions& s, WorkerJob& job, bool claim);

// Compares two secrets in constant time (whatever differs first).
bool secrets_equal(std::string_view a, std::string_view b);

// Who calls a pool (WorkerOptions::pool_jobs): the operator (the pool's own --token: it
// may stop the pool), or a job by its token (PoolJobs), whose `tandem-job`, when it says
// one, must be that token's job. Else UNAUTHENTICATED or PERMISSION_DENIED, with the fix.
struct PoolCaller {
  std::string job;
  double weight = 1;
  std::string settings;  // the job's data settings (PoolJob::settings)
  bool operator_token = false;
};
grpc::Status check_pool_caller(const grpc::ServerContext& ctx, const SecurityOptions& s, PoolJobs& jobs,
                               PoolCaller& who);

// The caller's job's ranks (its world size), carried as `tandem-job-ranks` on a stream
// (add_job_ranks): 1 when absent or not a number, at most kMostJobRanks.
inline constexpr int kMostJobRanks = 65536;
void add_job_ranks(grpc::ClientContext& ctx, int ranks);
int job_ranks_of(const grpc::ServerContext& ctx);

// The data worker ("address:port") a stream to a host's stream relay is for, carried as
// `tandem-upstream` (stream_relay.h); "" when absent.
void add_upstream(grpc::ClientContext& ctx, const std::string& target);
std::string upstream_of(const grpc::ServerContext& ctx);

// True when `address` (host[:port]) is a loopback address: the data plane is private
// there even without a token.
bool is_loopback(const std::string& address);

// Fills s.token from s.token_file when one is named, and checks the token and job name
// can travel as gRPC headers. A token file may also be a directory holding exactly one
// file: a SageMaker input channel (/opt/ml/input/data/tandem-token) made from one S3
// object. Throws ConfigError for an unreadable or empty token file or an unprintable
// token or job name.
void resolve_security(SecurityOptions& s);

// The one error for an empty token, wherever it came from (`source`: "--token",
// "TANDEM_TOKEN", "--token-file PATH"): an empty token would turn authentication off.
std::string empty_token_error(const std::string& source);

// The SageMaker input channel a job's token may come from when no --token, --token-file
// or TANDEM_TOKEN is given: <sagemaker_root>/input/data/tandem-token (docs/security.md).
// Returns its path when that directory exists, else "".
std::string token_channel(const std::string& sagemaker_root);

}  // namespace tandem::transport
