// Who may speak to a data worker: the job token, the job name, TLS, and peer text in
// logs. Real servers on loopback port 0 and, end to end, real processes.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include "process_helpers.h"
#include "worker_fixture.h"
#include "tandem/cli/options.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/worker_link.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/worker_client.h"
#include "tandem/transport/worker_server.h"

namespace tandem::transport {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace tandem::testing;

SecurityOptions with_token(const std::string& token, const std::string& job = "") {
  SecurityOptions s;
  s.token = token;
  s.job = job;
  return s;
}

// A worker in this process, on a free loopback port.
// One preprocessing thread, the given security.
struct Worker : InProcessWorker {
  explicit Worker(SecurityOptions security, const std::string& bind = "127.0.0.1:0")
      : InProcessWorker(one_thread(), small_data(), std::move(security), bind) {}
  static WorkerOptions one_thread() {
    WorkerOptions o;
    o.threads = 1;
    return o;
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Security, WithoutTheTokenNothingButTheHealthCheckAnswers) {
  Worker w(with_token("s3cret-token"));
  for (const SecurityOptions& client : {SecurityOptions{}, with_token("wrong-token"), with_token("s3cret-tokeX")}) {
    auto rogue = ready_client(w.target(), client);  // the standard health check stays open
    const std::string info = error_of([&] { rogue->info(5); });
    EXPECT_NE(info.find("UNAUTHENTICATED"), std::string::npos) << info;  // gRPC code 16
    EXPECT_NE(info.find(client.token.empty() ? "needs the job's token" : "wrong token"), std::string::npos) << info;
    EXPECT_FALSE(rogue->shutdown("rogue says stop", 5).ok()) << "a stranger stopped the worker";
    // Streaming is refused too: the source fails with the reason, no batch arrives.
    data::Sampler sampler(400, 8, 0);
    feed::Scheduler sched([&](uint64_t s) { return sampler.request(s); }, {4, 4, 10});
    feed::WorkerLink link(std::move(rogue), sched, data::make_dataset(small_data())->info(), {.inflight = 2});
    link.start(false);
    const std::string stream = error_of([&] { sched.next(); });
    EXPECT_NE(stream.find("token"), std::string::npos) << stream;
    link.stop();
  }
  EXPECT_FALSE(w.stopped());
  auto trainer = make_worker_client(w.target(), with_token("s3cret-token"));
  EXPECT_EQ(trainer->info(5).dataset.size, 400u);
  EXPECT_TRUE(trainer->shutdown("training finished", 5).ok());
  ASSERT_EQ(w.waiter.wait_for(10s), std::future_status::ready);
}

TEST(Security, AWorkerRefusesATrainerOfAnotherJob) {
  Worker w(with_token("t", "job-a"));
  auto other = make_worker_client(w.target(), with_token("t", "job-b"));
  const std::string e = error_of([&] { other->info(5); });
  EXPECT_NE(e.find("belongs to job 'job-a', not to job 'job-b'"), std::string::npos) << e;
  EXPECT_FALSE(other->shutdown("the other job finished", 5).ok());
  auto unnamed = make_worker_client(w.target(), with_token("t"));
  EXPECT_NE(error_of([&] { unnamed->info(5); }).find("without a job name"), std::string::npos);
  auto mine = make_worker_client(w.target(), with_token("t", "job-a"));
  EXPECT_EQ(mine->info(5).dataset.size, 400u);
}

TEST(Security, PeerTextIsEscapedAndShortened) {
  EXPECT_EQ(printable("ok\nstep=1 loss=0.1\x1b[2J"), "ok\\nstep=1 loss=0.1\\x1b[2J");
  EXPECT_EQ(printable("a\\b\t"), "a\\\\b\\t");
  const std::string big(100000, 'x');
  const std::string s = printable(big, 50);
  EXPECT_LT(s.size(), 80u);
  EXPECT_NE(s.find("(100000 bytes)"), std::string::npos);
}

TEST(Security, LoopbackAddressesAreRecognised) {
  EXPECT_TRUE(is_loopback("127.0.0.1:6000"));
  EXPECT_TRUE(is_loopback("127.1.2.3"));
  EXPECT_TRUE(is_loopback("localhost:1"));
  EXPECT_TRUE(is_loopback("[::1]:6000"));
  EXPECT_FALSE(is_loopback("0.0.0.0:6000"));
  EXPECT_FALSE(is_loopback("10.0.0.5:6000"));
  EXPECT_FALSE(is_loopback("algo-1:6000"));
}

// A worker started without a job name takes the job of the first stream; before one,
// it belongs to none (Info and Shutdown from anyone with the token).
TEST(Security, AWorkerWithoutAJobNameBelongsToTheJobOfItsFirstStream) {
  WorkerJob unnamed("");
  EXPECT_TRUE(unnamed.admit("job-b", false).ok()) << "Info before any stream";
  EXPECT_TRUE(unnamed.admit("job-a", true).ok());
  EXPECT_TRUE(unnamed.admit("job-a", true).ok()) << "another rank of the same job";
  EXPECT_TRUE(unnamed.admit("job-a", false).ok());
  for (bool claim : {false, true}) {
    const grpc::Status refused = unnamed.admit("job-b", claim);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(refused.error_message().find("belongs to job 'job-a', not to job 'job-b' (it was started without a job "
                                           "name"),
              std::string::npos)
        << refused.error_message();
  }
  EXPECT_EQ(unnamed.admit("", false).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  WorkerJob first_unnamed("");  // a first trainer without a job name: only such trainers after it
  EXPECT_TRUE(first_unnamed.admit("", true).ok());
  EXPECT_NE(first_unnamed.admit("job-b", true).error_message().find("belongs to a trainer without a job name"),
            std::string::npos);
  WorkerJob named("job-a");  // --job-name: no stream can change it
  EXPECT_EQ(named.admit("job-b", true).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(named.admit("job-b", false).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(named.admit("job-b", true).error_message().find("started without"), std::string::npos);
}

TEST(Security, TokenFilesAndBadTokensAreClearErrors) {
  const fs::path dir = fresh_dir("token-files");
  std::ofstream(dir / "token") << "abc123\n";
  SecurityOptions s;
  s.token_file = (dir / "token").string();
  resolve_security(s);
  EXPECT_EQ(s.token, "abc123");
  std::ofstream(dir / "empty") << "\n";
  s.token_file = (dir / "empty").string();
  EXPECT_NE(error_of([&] { resolve_security(s); }).find("is empty"), std::string::npos);
  s.token_file = (dir / "missing").string();
  EXPECT_NE(error_of([&] { resolve_security(s); }).find("cannot read --token-file"), std::string::npos);
  SecurityOptions spaced;
  spaced.token = "has space";
  EXPECT_NE(error_of([&] { resolve_security(spaced); }).find("printable ASCII"), std::string::npos);
  // A directory holding one file (a SageMaker channel of one S3 object) is that file.
  fs::create_directories(dir / "channel");
  std::ofstream(dir / "channel" / "any-object-name") << "from-the-channel\n";
  s.token_file = (dir / "channel").string();
  resolve_security(s);
  EXPECT_EQ(s.token, "from-the-channel");
  std::ofstream(dir / "channel" / "second") << "x";
  EXPECT_NE(error_of([&] { resolve_security(s); }).find("holds 2 files, not one"), std::string::npos);
}

cluster::EnvLookup env_with(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

// Without --token, --token-file or TANDEM_TOKEN, the token comes from the SageMaker
// channel tandem-token, if the job has one; TANDEM_TOKEN and the flags come first.
TEST(Security, TheTokenChannelIsTheLastPlaceATokenComesFrom) {
  const fs::path root = fresh_dir("token-channel-unit");
  Settings none;
  none.cluster.sagemaker_root = root.string();
  cli::finish_settings(none, false, env_with({}));
  EXPECT_EQ(none.security.token, "") << "no channel, no token";
  fs::create_directories(root / "input/data/tandem-token");
  std::ofstream(root / "input/data/tandem-token/token") << "channel-token\n";
  Settings from_channel = none;
  cli::finish_settings(from_channel, false, env_with({}));
  EXPECT_EQ(from_channel.security.token, "channel-token");
  Settings from_env = none;
  cli::finish_settings(from_env, false, env_with({{"TANDEM_TOKEN", "env-token"}}));
  EXPECT_EQ(from_env.security.token, "env-token");
  Settings from_flag = none;
  from_flag.security.token = "flag-token";
  cli::finish_settings(from_flag, false, env_with({}));
  EXPECT_EQ(from_flag.security.token, "flag-token");
}

// An empty token would turn authentication off: it is one error wherever it comes from.
TEST(Security, AnEmptyTokenIsTheSameErrorEverywhere) {
  const std::string error = "is empty, and an empty token would let anyone speak to the data workers";
  Settings s;
  EXPECT_NE(error_of([&] { cli::finish_settings(s, false, env_with({{"TANDEM_TOKEN", ""}})); })
                .find("the job's token from TANDEM_TOKEN " + error),
            std::string::npos);
  const fs::path dir = fresh_dir("empty-token");
  std::ofstream(dir / "settings.json") << R"({"token": ""})";
  fs::create_directories(dir / "root/input/config");
  std::ofstream(dir / "root/input/config/hyperparameters.json") << R"({"token": ""})";
  std::ofstream(dir / "empty-file") << "\n";
  const std::string quick = " --connect-timeout 2 --steps 1 --dataset-size 64 --image-size 16";
  struct Way {
    std::string args;
    bool empty_env;  // TANDEM_TOKEN= in the environment
    std::string source;
  };
  const std::vector<Way> ways = {
      {"worker --port 0 --bind 127.0.0.1 --idle-timeout 2 --token ''", false, "--token"},
      {"worker --port 0 --bind 127.0.0.1 --idle-timeout 2 --config " + (dir / "settings.json").string(), false,
       "--token"},
      {"worker --port 0 --bind 127.0.0.1 --idle-timeout 2 --sagemaker-root " + (dir / "root").string(), false,
       "--token"},
      {"worker --port 0 --bind 127.0.0.1 --idle-timeout 2", true, "TANDEM_TOKEN"},
      {"worker --port 0 --bind 127.0.0.1 --idle-timeout 2 --token-file " + (dir / "empty-file").string(), false,
       "--token-file"},
      {"trainer --workers 127.0.0.1:1 --local-workers 0" + quick, true, "TANDEM_TOKEN"},
      {"trainer --workers 127.0.0.1:1 --local-workers 0 --token ''" + quick, false, "--token"},
      {"launch --sagemaker-root " + (dir / "launch").string() + " --steps 1 --dataset-size 64 --image-size 16", true,
       "TANDEM_TOKEN"},
      {"simulate --worker-hosts 1 --steps 1 --dataset-size 64 --image-size 16", true, "TANDEM_TOKEN"},
  };
  for (const Way& way : ways) {
    if (way.empty_env) setenv("TANDEM_TOKEN", "", 1);
    const Outcome o = run_capture(way.args, dir / "out.log", 120);
    unsetenv("TANDEM_TOKEN");
    EXPECT_NE(o.code, 0) << way.args << "\n" << o.out;
    EXPECT_NE(o.out.find("the job's token from " + way.source), std::string::npos) << way.args << "\n" << o.out;
    EXPECT_NE(o.out.find(error), std::string::npos) << way.args << "\n" << o.out;
  }
}

// A self-signed certificate for "localhost", made with openssl for this test.
bool make_certificate(const fs::path& dir) {
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
                          " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
                          (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(Security, TlsWorkersServeTrainersThatTrustTheirCertificate) {
  const fs::path dir = fresh_dir("tls");
  if (!make_certificate(dir)) GTEST_SKIP() << "openssl cannot make a test certificate here";
  SecurityOptions server = with_token("tls-token");
  server.tls_cert = (dir / "cert.pem").string();
  server.tls_key = (dir / "key.pem").string();
  Worker w(server);
  SecurityOptions client = with_token("tls-token");
  client.tls_ca = (dir / "cert.pem").string();
  client.tls_server_name = "localhost";
  auto trusted = ready_client(w.target(), client, 10);
  EXPECT_EQ(trusted->info(5).dataset.size, 400u);
  auto plaintext = make_worker_client(w.target(), with_token("tls-token"));  // speaks plaintext to a TLS port
  EXPECT_NE(error_of([&] { plaintext->info(3); }), "");
  SecurityOptions bad = client;
  bad.tls_ca = (dir / "missing.pem").string();
  EXPECT_NE(error_of([&] { make_worker_client(w.target(), bad); }).find("cannot read the TLS CA file"),
            std::string::npos);
}

// End to end: a worker process with a token, a forged metric line in a Shutdown reason,
// and a trainer with the wrong token that fails with one clear error.
TEST(Security, EndToEndATrainerWithoutTheTokenFailsClearlyAndForgedLogLinesStayEscaped) {
  const fs::path dir = fresh_dir("secure-e2e");
  setenv("TANDEM_TOKEN", "e2e-token", 1);
  tandem::testing::Worker worker = start_worker("--threads 1 --dataset-size 400 --image-size 16", dir / "worker.log");
  unsetenv("TANDEM_TOKEN");
  const std::string target = worker.target();

  const int code = run_tandem("trainer --workers " + target + " --steps 3 --local-workers 0 --dataset-size 400"
                              " --image-size 16 --connect-timeout 10",
                              dir / "trainer.log", 60);
  EXPECT_EQ(code, 5) << slurp(dir / "trainer.log");
  EXPECT_NE(slurp(dir / "trainer.log").find("needs the job's token"), std::string::npos) << slurp(dir / "trainer.log");

  auto owner = make_worker_client(target, with_token("e2e-token"));
  EXPECT_TRUE(owner->shutdown("done\n2026-11-22T00:00:00.000 info step=999 loss=0.0001", 5).ok());
  EXPECT_EQ(wait_exit(worker.child, 10s), 0);
  const std::string after = slurp(dir / "worker.log");
  EXPECT_EQ(after.find("\n2026-11-22T00:00:00.000 info step=999"), std::string::npos) << after;
  EXPECT_NE(after.find("done\\n2026-11-22"), std::string::npos) << after;
}

// Two jobs pointed at one worker (failure 6 of the hardening issue: the first to finish
// used to shut the worker down under the other). The worker belongs to job-a: job-b's
// trainer is refused at start with the reason, its Shutdown is refused too, and job-a
// trains on until it is stopped.
TEST(Security, EndToEndTwoJobsOnOneWorkerCannotStopEachOther) {
  const fs::path dir = fresh_dir("two-jobs");
  const std::string data = " --dataset-size 400 --image-size 16";
  setenv("TANDEM_TOKEN", "shared-token", 1);
  tandem::testing::Worker worker = start_worker("--threads 1 --job-name job-a" + data, dir / "worker.log");
  const std::string target = worker.target();
  Child a = spawn("trainer --job-name job-a --workers " + target + " --steps 1000000 --log-every 10 --local-workers 0"
                  " --train-threads 1 --batch-size 8" + data,
                  dir / "a.log");
  ASSERT_TRUE(wait_for_text(dir / "a.log", "step=10 ", 60s)) << slurp(dir / "a.log");
  const int b = run_tandem("trainer --job-name job-b --workers " + target + " --steps 3 --local-workers 0"
                           " --connect-timeout 10" + data,
                           dir / "b.log", 60);
  unsetenv("TANDEM_TOKEN");
  EXPECT_EQ(b, 5) << slurp(dir / "b.log");
  EXPECT_NE(slurp(dir / "b.log").find("belongs to job 'job-a', not to job 'job-b'"), std::string::npos)
      << slurp(dir / "b.log");
  const size_t steps_then = slurp(dir / "a.log").size();
  ASSERT_TRUE(wait_for_text(dir / "a.log", "step=", 30s, steps_then)) << "job-a stalled: " << slurp(dir / "a.log");
  kill(a.pid, SIGTERM);
  EXPECT_EQ(wait_exit(a, 60s), 75) << slurp(dir / "a.log");
  EXPECT_EQ(wait_exit(worker.child, 30s), 0) << slurp(dir / "worker.log");
  EXPECT_NE(slurp(dir / "worker.log").find("trainer interrupted"), std::string::npos) << slurp(dir / "worker.log");
}

// Issue 21's item 2: a worker without a job name used to serve every job, and the job
// that finished first stopped it under the other. Now it belongs to job-a, whose trainer
// streamed first: job-b's trainer is refused by name, job-b's Shutdown too, and job-a
// trains on.
TEST(Security, EndToEndAWorkerWithoutAJobNameServesOnlyTheFirstJobThatStreams) {
  const fs::path dir = fresh_dir("unnamed-worker");
  const std::string data = " --dataset-size 400 --image-size 16";
  unsetenv("TRAINING_JOB_NAME");
  unsetenv("SLURM_JOB_ID");
  setenv("TANDEM_TOKEN", "shared-token", 1);
  tandem::testing::Worker worker = start_worker("--threads 1" + data, dir / "worker.log");
  ASSERT_NE(worker.port, 0) << slurp(dir / "worker.log");
  EXPECT_NE(slurp(dir / "worker.log").find("no job name"), std::string::npos) << slurp(dir / "worker.log");
  const std::string target = worker.target();
  Child a = spawn("trainer --job-name job-a --workers " + target + " --steps 1000000 --log-every 10 --local-workers 0"
                  " --train-threads 1 --batch-size 8" + data,
                  dir / "a.log");
  ASSERT_TRUE(wait_for_text(dir / "a.log", "step=10 ", 60s)) << slurp(dir / "a.log");
  const int b = run_tandem("trainer --job-name job-b --workers " + target + " --steps 3 --local-workers 0"
                           " --connect-timeout 10" + data,
                           dir / "b.log", 60);
  unsetenv("TANDEM_TOKEN");
  EXPECT_EQ(b, 5) << slurp(dir / "b.log");
  EXPECT_NE(slurp(dir / "b.log").find("belongs to job 'job-a', not to job 'job-b'"), std::string::npos)
      << slurp(dir / "b.log");
  auto b_again = make_worker_client(target, with_token("shared-token", "job-b"));
  EXPECT_FALSE(b_again->shutdown("job-b finished", 5).ok()) << "job-b stopped job-a's worker";
  const size_t steps_then = slurp(dir / "a.log").size();
  ASSERT_TRUE(wait_for_text(dir / "a.log", "step=", 30s, steps_then)) << "job-a stalled: " << slurp(dir / "a.log");
  EXPECT_NE(slurp(dir / "worker.log").find("now belongs to job 'job-a'"), std::string::npos) << slurp(dir / "worker.log");
  kill(a.pid, SIGTERM);
  EXPECT_EQ(wait_exit(a, 60s), 75) << slurp(dir / "a.log");
  EXPECT_EQ(wait_exit(worker.child, 30s), 0) << slurp(dir / "worker.log");
}

// `--port 0` binds a free port: the warning of an open data plane names it, not ":0".
TEST(Security, AnOpenWorkerOnPortZeroNamesTheBoundPort) {
  const fs::path dir = fresh_dir("port-zero");
  unsetenv("TANDEM_TOKEN");
  const Outcome o = run_capture("worker --port 0 --idle-timeout 1 --threads 1 --dataset-size 64 --image-size 16",
                                dir / "worker.log", 60);
  EXPECT_EQ(o.code, 5) << o.out;  // idle
  const size_t at = o.out.find(" on port ");
  ASSERT_NE(at, std::string::npos) << o.out;
  const std::string port = std::to_string(std::atoi(o.out.c_str() + at + 9));
  EXPECT_EQ(o.out.find("0.0.0.0:0 "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("THE DATA PLANE IS OPEN: no token is set, so anyone who reaches 0.0.0.0:" + port + " "),
            std::string::npos)
      << o.out;
}

// docs/security.md's way on SageMaker: the token is a file in the input channel
// `tandem-token` (an access-controlled S3 object), read on every host without a flag, a
// variable or a hyperparameter. It authenticates workers and trainer, and never appears
// in their logs, the summary, the run's other files or `inspect`.
TEST(Security, EndToEndATokenFromTheSageMakerChannelAuthenticatesAndIsNeverShown) {
  const fs::path dir = fresh_dir("channel-e2e");
  const std::string secret = "chan-s3cret-" + std::to_string(getpid());
  for (const char* host : {"worker-host", "trainer-host"}) {
    fs::create_directories(dir / host / "input/data/tandem-token");
    std::ofstream(dir / host / "input/data/tandem-token/token") << secret << "\n";
  }
  unsetenv("TANDEM_TOKEN");
  const std::string data = " --dataset-size 400 --image-size 16";
  tandem::testing::Worker worker =
      start_worker("--threads 1 --sagemaker-root " + (dir / "worker-host").string() + data, dir / "worker.log");
  ASSERT_NE(worker.port, 0) << slurp(dir / "worker.log");
  auto stranger = make_worker_client(worker.target(), SecurityOptions{});
  EXPECT_NE(error_of([&] { stranger->info(5); }).find("needs the job's token"), std::string::npos);
  const Outcome trainer = run_capture("trainer --sagemaker-root " + (dir / "trainer-host").string() + " --workers " +
                                          worker.target() + " --steps 3 --local-workers 0 --connect-timeout 30" + data,
                                      dir / "trainer.log", 120);
  EXPECT_EQ(trainer.code, 0) << trainer.out;
  EXPECT_EQ(wait_exit(worker.child, 30s), 0) << slurp(dir / "worker.log");  // the trainer's Shutdown, authenticated
  const Outcome inspect = run_capture("inspect --sagemaker-root " + (dir / "trainer-host").string(), dir / "inspect.log");
  EXPECT_EQ(inspect.code, 0) << inspect.out;
  ASSERT_TRUE(fs::exists(dir / "trainer-host/output/data/summary.json")) << trainer.out;
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().parent_path().filename() == "tandem-token") continue;
    ++files;
    EXPECT_EQ(slurp(e.path()).find(secret), std::string::npos) << "the token is in " << e.path();
  }
  EXPECT_GE(files, 4);  // the logs, inspect's output, the summary
}

}  // namespace
}  // namespace tandem::transport
