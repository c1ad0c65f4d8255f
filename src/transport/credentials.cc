#include "tandem/transport/credentials.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::transport {
namespace {

constexpr const char* kJobKey = "tandem-job";
constexpr const char* kJobRanksKey = "tandem-job-ranks";
constexpr const char* kUpstreamKey = "tandem-upstream";
// Another job's worker answering means two jobs chose one port on one host.
constexpr const char* kPortsCollided =
    "If two jobs share this host, their ports collided: give each job its own --worker-port and --master-port "
    "(on Slurm tandem derives them from the job's id unless they are given; docs/platforms.md)";

std::string read_pem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || ss.str().empty()) {
    throw ConfigError(std::string("cannot read the TLS ") + what + " " + path +
                      ": check the path and its permissions (PEM files)");
  }
  return ss.str();
}

// Compares every byte whatever differs first, so the time taken says nothing about
// how much of a guess was right.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string metadata(const grpc::ServerContext& ctx, const char* key) {
  const auto& md = ctx.client_metadata();
  const auto it = md.find(key);
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

std::string job_phrase(const std::string& job) {
  return job.empty() ? std::string("a trainer without a job name") : "job '" + printable(job, 80) + "'";
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> server_credentials(const SecurityOptions& s) {
  if (s.tls_cert.empty() && s.tls_key.empty()) return grpc::InsecureServerCredentials();
  if (s.tls_cert.empty() || s.tls_key.empty()) {
    throw ConfigError("a data worker serves TLS with both --tls-cert and --tls-key: give both, or neither");
  }
  grpc::SslServerCredentialsOptions o(s.tls_ca.empty()
                                          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!s.tls_ca.empty()) o.pem_root_certs = read_pem(s.tls_ca, "CA file");
  o.pem_key_cert_pairs.push_back({read_pem(s.tls_key, "key"), read_pem(s.tls_cert, "certificate")});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const SecurityOptions& s) {
  if (s.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = read_pem(s.tls_ca, "CA file");
  if (!s.tls_cert.empty() || !s.tls_key.empty()) {
    if (s.tls_cert.empty() || s.tls_key.empty()) {
      throw ConfigError("a trainer presents a client certificate with both --tls-cert and --tls-key: give both");
    }
    o.pem_cert_chain = read_pem(s.tls_cert, "certificate");
    o.pem_private_key = read_pem(s.tls_key, "key");
  }
  return grpc::SslCredentials(o);
}

void authorise(grpc::ClientContext& ctx, const SecurityOptions& s) {
  if (!s.token.empty()) ctx.AddMetadata("authorization", "Bearer " + s.token);
  if (!s.job.empty()) ctx.AddMetadata(kJobKey, s.job);
}

WorkerJob::WorkerJob(std::string named) : named_(!named.empty()) {
  if (named_) job_ = std::move(named);
}

grpc::Status WorkerJob::admit(const std::string& caller, bool claim) {
  std::lock_guard lock(mu_);
  if (!job_) {
    if (!claim) return grpc::Status::OK;
    job_ = caller;
    spdlog::info("this data worker now belongs to {}, the first to open a stream to it: it refuses other jobs",
                 job_phrase(caller));
    return grpc::Status::OK;
  }
  if (caller == *job_) return grpc::Status::OK;
  std::string why = "this data worker belongs to " + job_phrase(*job_) + ", not to " + job_phrase(caller);
  if (!named_) why += " (it was started without a job name and took the job of the first trainer that streamed from it)";
  return {grpc::StatusCode::PERMISSION_DENIED,
          why + ": point the trainer at its own job's workers, or give both the same --job-name. " + kPortsCollided};
}

grpc::Status check_caller(const grpc::ServerContext& ctx, const SecurityOptions& s, WorkerJob& job, bool claim) {
  if (!s.token.empty()) {
    const std::string given = metadata(ctx, "authorization");
    if (given.empty()) {
      return {grpc::StatusCode::UNAUTHENTICATED,
              "this data worker needs the job's token: give the trainer the same TANDEM_TOKEN, --token-file or "
              "token setting as the workers"};
    }
    if (!same_secret(given, "Bearer " + s.token)) {
      return {grpc::StatusCode::UNAUTHENTICATED,
              "wrong token for this data worker: give the trainer the same TANDEM_TOKEN, --token-file or token "
              "setting as the workers. " + std::string(kPortsCollided)};
    }
  }
  return job.admit(metadata(ctx, kJobKey), claim);
}

void add_job_ranks(grpc::ClientContext& ctx, int ranks) { ctx.AddMetadata(kJobRanksKey, std::to_string(ranks)); }

int job_ranks_of(const grpc::ServerContext& ctx) {
  const std::string text = metadata(ctx, kJobRanksKey);
  int ranks = 1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ranks);
  if (ec != std::errc() || end != text.data() + text.size()) return 1;
  return std::clamp(ranks, 1, kMostJobRanks);
}

void add_upstream(grpc::ClientContext& ctx, const std::string& target) { ctx.AddMetadata(kUpstreamKey, target); }

std::string upstream_of(const grpc::ServerContext& ctx) { return metadata(ctx, kUpstreamKey); }

bool secrets_equal(std::string_view a, std::string_view b) { return same_secret(a, b); }

grpc::Status check_pool_caller(const grpc::ServerContext& ctx, const SecurityOptions& s, PoolJobs& jobs,
                               PoolCaller& who) {
  const std::string given = metadata(ctx, "authorization");
  who = {};
  if (!s.token.empty() && same_secret(given, "Bearer " + s.token)) {
    who.operator_token = true;
    return grpc::Status::OK;
  }
  const std::optional<PoolJob> job = given.empty() ? std::nullopt : jobs.find(given);
  if (!job) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            given.empty() ? "this pool of data workers admits jobs by their own tokens: give the trainer its job's "
                            "token (TANDEM_TOKEN, --token-file or the token setting) from whoever runs the pool"
                          : "this token is not one of this pool's jobs (revoked, or never issued): ask whoever runs "
                            "the pool for a job token (its --pool-jobs file, docs/security.md)"};
  }
  const std::string said = metadata(ctx, kJobKey);
  if (!said.empty() && said != job->name) {
    return {grpc::StatusCode::PERMISSION_DENIED,
            "this token is job '" + printable(job->name, 80) + "''s, and the trainer says it is job '" +
                printable(said, 80) + "': give each job its own token, or the job name its token was issued to"};
  }
  who.job = job->name;
  who.weight = job->weight;
  who.settings = job->settings;
  return grpc::Status::OK;
}

bool is_loopback(const std::string& address) {
  std::string host = address;
  if (!host.empty() && host.front() == '[') host = host.substr(1, host.find(']') - 1);  // [::1]:port
  else if (const size_t colon = host.rfind(':'); colon != std::string::npos && host.find(':') == colon) {
    host = host.substr(0, colon);
  }
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string empty_token_error(const std::string& source) {
  return "the job's token from " + source + " is empty, and an empty token would let anyone speak to the data "
         "workers: give every host of the job the same non-empty token (e.g. `openssl rand -hex 32`), or unset it "
         "to run without one on a private network (docs/security.md)";
}

std::string token_channel(const std::string& sagemaker_root) {
  const std::filesystem::path dir = std::filesystem::path(sagemaker_root) / "input" / "data" / "tandem-token";
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) ? dir.string() : std::string();
}

namespace {

// A token file, or a directory holding exactly one (a SageMaker channel of one object).
std::string token_file_in(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path, ec)) {
    if (e.is_regular_file(ec)) files.push_back(e.path().string());
  }
  if (files.size() != 1) {
    throw ConfigError("the token directory " + printable(path, 200) + " holds " + std::to_string(files.size()) +
                      " files, not one: give the token channel a single S3 object, or name the file with --token-file");
  }
  return files.front();
}

std::string read_token_file(const std::string& named) {
  const std::string path = token_file_in(named);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (!in && token.empty()) {
    throw ConfigError("cannot read --token-file " + printable(path, 200) + ": check the path and its permissions");
  }
  if (token.empty()) throw ConfigError(empty_token_error("--token-file " + printable(path, 200)));
  return token;
}

}  // namespace

void resolve_security(SecurityOptions& s) {
  if (!s.token_file.empty()) s.token = read_token_file(s.token_file);
  for (char c : s.token) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) {
      throw ConfigError("the token may hold only printable ASCII without spaces (it travels as a gRPC header): "
                        "use e.g. `openssl rand -hex 32`");
    }
  }
  for (char c : s.job) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) {
      throw ConfigError("the job name '" + printable(s.job, 80) +
                        "' must be printable ASCII (it travels as a gRPC header): set --job-name");
    }
  }
}

}  // namespace tandem::transport
