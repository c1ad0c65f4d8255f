#include "tandem/transport/credentials.h"

#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

namespace tandem::transport {
namespace {

constexpr const char* kJobKey = "tandem-job";

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

grpc::Status check_caller(const grpc::ServerContext& ctx, const SecurityOptions& s) {
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
              "setting as the workers"};
    }
  }
  if (!s.job.empty()) {
    const std::string job = metadata(ctx, kJobKey);
    if (job != s.job) {
      return {grpc::StatusCode::PERMISSION_DENIED,
              "this data worker belongs to job '" + printable(s.job, 80) + "', not to " +
                  (job.empty() ? std::string("a trainer without a job name") : "job '" + printable(job, 80) + "'") +
                  ": point the trainer at its own job's workers, or give both the same --job-name"};
    }
  }
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

void resolve_security(SecurityOptions& s) {
  if (!s.token_file.empty()) {
    std::ifstream in(s.token_file);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string token = ss.str();
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    if (!in && token.empty()) {
      throw ConfigError("cannot read --token-file " + s.token_file + ": check the path and its permissions");
    }
    if (token.empty()) throw ConfigError("--token-file " + s.token_file + " is empty: write the job's token into it");
    s.token = token;
  }
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
