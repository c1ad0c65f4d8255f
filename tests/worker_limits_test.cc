// A worker stays up and bounded whatever its clients send: oversized requests, more
// streams than it allows, and streams that ask and never read. A real worker process
// on loopback, a raw gRPC client, and the worker's memory read from /proc.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "process_helpers.h"
#include "tandem/common/clock.h"
#include "tandem/transport/credentials.h"
#include "tandem/transport/worker_client.h"
#include "tandem/v1/data.grpc.pb.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using namespace tandem::testing;

// Resident memory of a process, in MiB.
long rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long kib = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kib;
      return kib / 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  return -1;
}

struct RawStream {
  std::unique_ptr<v1::DataService::Stub> stub;  // its own connection, like 40 separate clients
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::BatchRequest, v1::Batch>> rw;
};

v1::BatchRequest request(uint64_t seq, int samples) {
  v1::BatchRequest r;
  r.set_sequence(seq);
  for (int i = 0; i < samples; ++i) r.add_indices(static_cast<uint64_t>(i));
  return r;
}

// A worker process on a free loopback port that exits when idle for `idle_s`; returns
// once it serves.
Worker idle_worker(const fs::path& dir, int idle_s) {
  Worker w = start_worker("--threads 1 --idle-timeout " + std::to_string(idle_s), dir / "worker.log");
  EXPECT_NE(w.port, 0) << slurp(dir / "worker.log");
  return w;
}

class WorkerLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir("limits-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    // premade 224 px float32: 602 KB a sample, cheap to make, so memory is the only limit.
    Worker w = start_worker("--threads 2 --data premade --image-size 224 --max-inflight-mb 64 --max-streams 16"
                            " --max-request-samples 64",
                            dir_ / "worker.log");
    ASSERT_NE(w.port, 0) << slurp(dir_ / "worker.log");
    port_ = w.port;
    worker_ = std::move(w.child);
    channel_ = grpc::CreateChannel(target(), grpc::InsecureChannelCredentials());
    stub_ = v1::DataService::NewStub(channel_);
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

  fs::path dir_;
  int port_ = 0;
  Child worker_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DataService::Stub> stub_;
};

TEST_F(WorkerLimits, ARequestForTooManySamplesIsRefusedAndTheWorkerServesOn) {
  RawStream s;
  s.rw = stub_->StreamBatches(&s.ctx);
  ASSERT_TRUE(s.rw->Write(request(0, 3'000'000 / 1000)));  // 3,000 samples: over --max-request-samples 64
  v1::Batch reply;
  ASSERT_TRUE(s.rw->Read(&reply));
  EXPECT_NE(reply.header().error().find("--max-request-samples"), std::string::npos) << reply.header().error();
  s.ctx.TryCancel();
  s.rw->Finish();
  // A 3 MB request of 3 million indices is not even parsed.
  RawStream big;
  big.rw = stub_->StreamBatches(&big.ctx);
  big.rw->Write(request(1, 3'000'000));
  big.rw->WritesDone();
  while (big.rw->Read(&reply)) {
  }
  EXPECT_FALSE(big.rw->Finish().ok());
  auto check = transport::make_worker_client(target(), {});
  EXPECT_EQ(check->info(5).dataset.name, "premade");
  EXPECT_EQ(waitpid(worker_.pid, nullptr, WNOHANG), 0) << "the worker died:\n" << slurp(dir_ / "worker.log");
}

// How many of `n` streams opened at once (each on a connection of its own, saying its job
// has `ranks` ranks when given) the worker serves: each asks for one sample.
int streams_served(const std::string& target, int n, int ranks, std::vector<std::unique_ptr<RawStream>>& open) {
  int served = 0;
  for (int i = 0; i < n; ++i) {
    auto s = std::make_unique<RawStream>();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    s->stub = v1::DataService::NewStub(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    if (ranks > 0) transport::add_job_ranks(s->ctx, ranks);
    s->rw = s->stub->StreamBatches(&s->ctx);
    v1::Batch reply;
    if (s->rw->Write(request(static_cast<uint64_t>(i), 1)) && s->rw->Read(&reply) && reply.header().error().empty()) {
      ++served;
    }
    open.push_back(std::move(s));
  }
  return served;
}

// Without a token, what a caller says of its job lifts --max-streams (16) by at most as
// much again, and only while its streams are open: the hostile run's 600 streams saying
// 65,536 ranks were all served (1,212 threads), and so were later ones saying nothing.
TEST_F(WorkerLimits, AClaimedWorldSizeIsCappedWithoutATokenAndDoesNotStick) {
  std::vector<std::unique_ptr<RawStream>> open;
  EXPECT_EQ(streams_served(target(), 40, 65536, open), 32) << slurp(dir_ / "worker.log");
  for (auto& s : open) s->ctx.TryCancel();
  open.clear();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the worker sees them end
  // A stream that says nothing is of a job of one rank: 16 + 1.
  EXPECT_EQ(streams_served(target(), 20, 0, open), 17) << slurp(dir_ / "worker.log");
  for (auto& s : open) s->ctx.TryCancel();
  EXPECT_EQ(waitpid(worker_.pid, nullptr, WNOHANG), 0) << "the worker died:\n" << slurp(dir_ / "worker.log");
}

TEST_F(WorkerLimits, StreamsThatAskAndNeverReadCannotGrowTheWorker) {
  const long before = rss_mib(worker_.pid);
  std::vector<std::unique_ptr<RawStream>> streams;
  int refused = 0;
  for (int i = 0; i < 40; ++i) {
    auto s = std::make_unique<RawStream>();
    // Accepted streams end at this deadline; refused ones carry the worker's answer.
    s->ctx.set_deadline(std::chrono::system_clock::now() + 6s);
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    s->stub = v1::DataService::NewStub(grpc::CreateCustomChannel(target(), grpc::InsecureChannelCredentials(), args));
    s->rw = s->stub->StreamBatches(&s->ctx);
    // 32 requests of 64 samples: 1.2 GB per stream if the worker made them all.
    for (int k = 0; k < 32; ++k) {
      if (!s->rw->Write(request(static_cast<uint64_t>(k), 64))) break;
    }
    streams.push_back(std::move(s));
  }
  std::this_thread::sleep_for(3s);  // time for an unbounded worker to grow (measured, not synchronised)
  const long during = rss_mib(worker_.pid);
  for (auto& s : streams) {
    const grpc::Status st = s->rw->Finish();
    if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_NE(st.error_message().find("--max-streams"), std::string::npos) << st.error_message();
    }
  }
  // At most 16 are served at once; how many of the rest reach the handler (and are
  // refused) before their deadline depends on gRPC's thread pool.
  EXPECT_GT(refused, 0) << "streams beyond --max-streams 16 are refused";
  // 64 MiB of batches in flight, plus gRPC's buffers: far below the 48 GB asked for.
  EXPECT_LT(during - before, 600) << "worker grew from " << before << " to " << during << " MiB";
  auto check = transport::make_worker_client(target(), {});
  EXPECT_EQ(check->info(5).dataset.name, "premade");
}


// Liveness: a client that opens a stream and sends nothing, and a trainer that stops
// (SIGSTOP) mid-run, cannot keep a worker alive past its --idle-timeout.
TEST(WorkerLiveness, ASilentStreamIsClosedAndTheWorkerGoesIdle) {
  const fs::path dir = fresh_dir("silent-stream");
  Worker w = idle_worker(dir, 2);
  const int port = w.port;
  Child& worker = w.child;
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto stub = v1::DataService::NewStub(channel);
  grpc::ClientContext ctx;
  auto rw = stub->StreamBatches(&ctx);  // open, and say nothing
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_exit(worker, 30s), 5) << slurp(dir / "worker.log");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
  EXPECT_FALSE(rw->Finish().ok());
  EXPECT_NE(slurp(dir / "worker.log").find("no trainer contacted"), std::string::npos) << slurp(dir / "worker.log");
}

// Issue 21's item 4: three streams, one 4096-sample request each, never read, used to
// keep a worker alive (holding 315 MB) for as long as they stayed open. The batches it
// cannot write are dropped with their streams after --idle-timeout, and the worker goes
// idle.
TEST(WorkerLiveness, StreamsThatAskAndNeverReadAreClosedAndTheWorkerGoesIdle) {
  const fs::path dir = fresh_dir("never-read");
  Worker w = idle_worker(dir, 2);
  std::vector<std::unique_ptr<RawStream>> streams;
  for (int i = 0; i < 3; ++i) {
    auto s = std::make_unique<RawStream>();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    s->stub = v1::DataService::NewStub(grpc::CreateCustomChannel(w.target(), grpc::InsecureChannelCredentials(), args));
    s->rw = s->stub->StreamBatches(&s->ctx);
    ASSERT_TRUE(s->rw->Write(request(static_cast<uint64_t>(i), 4096)));
    streams.push_back(std::move(s));
  }
  EXPECT_EQ(wait_exit(w.child, 120s), 5) << slurp(dir / "worker.log");
  const std::string log = slurp(dir / "worker.log");
  EXPECT_NE(log.find("took no batch for 2 s (--idle-timeout)"), std::string::npos) << log;
  EXPECT_NE(log.find("no trainer contacted"), std::string::npos) << log;
  for (auto& s : streams) {  // a client that never read waits for its status past the end of the call: end it
    s->ctx.TryCancel();
    s->rw->Finish();
  }
}

TEST(WorkerLiveness, AStoppedTrainerDoesNotKeepItsWorkerAlive) {
  const fs::path dir = fresh_dir("sigstop-trainer");
  Worker w = idle_worker(dir, 3);
  const int port = w.port;
  Child& worker = w.child;
  Child trainer = spawn("trainer --workers 127.0.0.1:" + std::to_string(port) +
                            " --local-workers 0 --train-threads 1 --steps 1000000 --log-every 10",
                        dir / "trainer.log");
  ASSERT_TRUE(wait_for_text(dir / "trainer.log", "step=10 ", 60s)) << slurp(dir / "trainer.log");
  kill(trainer.pid, SIGSTOP);
  // Keepalive (15 s + 10 s) closes the dead connection, then the idle timeout ends the worker.
  EXPECT_EQ(wait_exit(worker, 90s), 5) << slurp(dir / "worker.log");
  kill(trainer.pid, SIGKILL);
}


// Info answers nothing about training progress: a client polling it cannot keep a worker
// (and its host's bill) alive past --idle-timeout.
TEST(WorkerLiveness, InfoCallsDoNotKeepAnIdleWorkerAlive) {
  const fs::path dir = fresh_dir("info-idle");
  Worker w = idle_worker(dir, 2);
  const int port = w.port;
  Child& worker = w.child;
  auto poller = transport::make_worker_client("127.0.0.1:" + std::to_string(port), {});
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (waitpid(worker.pid, nullptr, WNOHANG) != 0) {
      worker.reaped = true;
      break;
    }
    if (std::chrono::steady_clock::now() - start > 20s) break;
    try {
      poller->info(1);
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(300ms);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << "Info calls kept the worker alive";
  EXPECT_NE(slurp(dir / "worker.log").find("no trainer contacted"), std::string::npos) << slurp(dir / "worker.log");
}

// A worker no trainer of its job ever calls (the trainer failed before it could, or was
// given other workers or another token) leaves after --claim-timeout, not after
// --idle-timeout (600 s); one that a trainer called stays past it.
TEST(WorkerLiveness, AWorkerNoTrainerClaimsLeavesAfterTheClaimTimeout) {
  const fs::path dir = fresh_dir("unclaimed");
  Worker lone = start_worker("--threads 1 --idle-timeout 600 --claim-timeout 2", dir / "lone.log");
  ASSERT_NE(lone.port, 0) << slurp(dir / "lone.log");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_exit(lone.child, 30s), 5) << slurp(dir / "lone.log");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_NE(slurp(dir / "lone.log").find("within 2 s of its start (--claim-timeout)"), std::string::npos)
      << slurp(dir / "lone.log");

  Worker called = start_worker("--threads 1 --idle-timeout 600 --claim-timeout 2", dir / "called.log");
  ASSERT_NE(called.port, 0) << slurp(dir / "called.log");
  transport::make_worker_client(called.target(), {})->info(5);
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(waitpid(called.child.pid, nullptr, WNOHANG), 0) << slurp(dir / "called.log");
  kill(called.child.pid, SIGTERM);
  wait_exit(called.child, 30s);
}

// A taken port is the job's configuration, not a peer's failure: exit 3 at once, naming
// the port and the flag, without gRPC's own error lines before tandem's.
TEST(WorkerLiveness, ATakenPortIsAConfigurationErrorNamedAtOnce) {
  const fs::path dir = fresh_dir("taken-port");
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_capture("worker --bind 127.0.0.1 --port " + port + " --threads 1", dir / "worker.log", 30);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(r.out.find("cannot listen on 127.0.0.1:" + port + ": port " + port + " is taken by another process"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--port"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("chttp2_server"), std::string::npos) << "gRPC's own lines: " << r.out;
  close(fd);
}

// Connections that the peer closed (or reset): a read says end of file at once.
int closed_by_peer(const std::vector<int>& socks) {
  int closed = 0;
  for (const int fd : socks) {
    char byte;
    const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) ++closed;
  }
  return closed;
}

std::vector<int> raw_connections(int port, int n) {
  std::vector<int> socks;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
    socks.push_back(fd);
  }
  return socks;
}

int open_files(pid_t pid) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) ++n;
  return n;
}

// Idle TCP connections from anyone (connecting needs no token) cannot use up the worker's
// descriptors (issue 51: 80 of them at an open-files limit of 64 made its reads fail with
// "Too many open files", and its trainer exit 4, "fix the data"): past --max-connections
// each is closed at once and said in the log; ones that never speak gRPC are dropped by
// the worker's keepalive; and the worker serves a trainer that comes after them.
TEST(WorkerConnections, ConnectionsPastTheCapAreClosedAndSilentOnesDoNotHoldTheirPlace) {
  const fs::path dir = fresh_dir("connections");
  Worker w = start_worker("--threads 1 --max-connections 8 --idle-timeout 120", dir / "worker.log");
  ASSERT_NE(w.port, 0) << slurp(dir / "worker.log");
  const int files_before = open_files(w.child.pid);
  std::vector<int> socks = raw_connections(w.port, 30);
  int closed = 0;
  for (auto deadline = Clock::now() + 10s; (closed = closed_by_peer(socks)) < 22 && Clock::now() < deadline;) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(closed, 22) << "8 kept, the rest closed at once";
  EXPECT_LE(open_files(w.child.pid), files_before + 8);
  EXPECT_TRUE(wait_for_text(dir / "worker.log", "(--max-connections)", 5s)) << slurp(dir / "worker.log");
  // The 8 kept never speak: each is closed after 5 s without a byte.
  for (auto deadline = Clock::now() + 30s; (closed = closed_by_peer(socks)) < 30 && Clock::now() < deadline;) {
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(closed, 30) << "silent connections hold their places";
  auto client = transport::make_worker_client(w.target(), {});
  EXPECT_NO_THROW(client->info(10));
  for (const int fd : socks) close(fd);
  EXPECT_EQ(waitpid(w.child.pid, nullptr, WNOHANG), 0) << "the worker died:\n" << slurp(dir / "worker.log");
}

}  // namespace
}  // namespace tandem
