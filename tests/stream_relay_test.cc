// A host's ranks share one stream to each data worker through the stream relay
// (transport/stream_relay.h, --share-streams): a real worker on loopback, a real relay on
// a Unix socket, the ranks' real gRPC clients; and a simulated job whose ranks go through
// their host's relay.
#include <atomic>
#include <cstring>
#include <map>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_helpers.h"
#include "tandem/transport/stream_relay.h"
#include "tandem/transport/worker_client.h"
#include "tandem/v1/data.grpc.pb.h"
#include "worker_fixture.h"

namespace tandem::transport {
namespace {

using namespace std::chrono_literals;
using tandem::testing::fresh_dir;
using tandem::testing::ready_client;
using Worker = tandem::testing::InProcessWorker;

// Rank r's request number s: sequences overlap between ranks, the samples do not.
data::BatchRequest rank_request(int r, uint64_t s) {
  data::BatchRequest q;
  q.sequence = s;
  for (uint64_t i = 0; i < 4; ++i) q.indices.push_back(100 * static_cast<uint64_t>(r) + 4 * s + i);
  return q;
}

class StreamRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir("relay-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }
  std::unique_ptr<StreamRelay> relay(SecurityOptions security = {}) {
    return std::make_unique<StreamRelay>(StreamRelayOptions{(dir_ / "relay.sock").string(), std::move(security)});
  }
  std::filesystem::path dir_;
};

TEST_F(StreamRelayTest, RanksShareOneStreamAndEachGetsItsOwnBatches) {
  Worker w;
  const auto r = relay();
  constexpr int kRanks = 4, kRequests = 10;
  std::vector<std::unique_ptr<WorkerClient>> clients;
  std::vector<std::unique_ptr<BatchCall>> calls;
  for (int i = 0; i < kRanks; ++i) {
    clients.push_back(make_worker_client(w.target(), {}, r->address()));
    calls.push_back(clients.back()->stream());
    for (uint64_t s = 0; s < kRequests; ++s) ASSERT_TRUE(calls.back()->write(rank_request(i, s)));
  }
  std::map<int, std::map<uint64_t, data::Batch>> got;
  for (int i = 0; i < kRanks; ++i) {
    for (int n = 0; n < kRequests; ++n) {
      auto b = calls[i]->read();
      ASSERT_TRUE(b) << "rank " << i << " got " << n << " of " << kRequests;
      got[i][b->sequence] = std::move(*b);
    }
  }
  // Every rank's stream is open here: the worker serves one.
  EXPECT_EQ(w.server.stats().open_streams, 1);
  EXPECT_EQ(r->stats().rank_streams, kRanks);
  EXPECT_EQ(r->stats().worker_streams, 1);
  const data::Batch direct = tandem::testing::request_batch(w.target(), rank_request(2, 7));
  for (int i = 0; i < kRanks; ++i) {
    calls[i]->writes_done();
    EXPECT_FALSE(calls[i]->read()) << "rank " << i << " was sent a batch it did not ask for";
    EXPECT_TRUE(calls[i]->finish().ok());
    ASSERT_EQ(got[i].size(), static_cast<size_t>(kRequests));
    for (const auto& [s, b] : got[i]) EXPECT_EQ(b.indices, rank_request(i, s).indices) << "rank " << i << " seq " << s;
  }
  const data::Batch& relayed = got[2][7];
  ASSERT_EQ(relayed.data.size(), direct.data.size());
  EXPECT_EQ(std::memcmp(relayed.data.data(), direct.data.data(), direct.data.size()), 0)
      << "a relayed batch has the bytes of the same request sent straight to the worker";
  EXPECT_EQ(relayed.labels, direct.labels);
  EXPECT_EQ(r->stats().batches, static_cast<uint64_t>(kRanks * kRequests));
  EXPECT_EQ(r->stats().worker_streams_peak, 1);
}

TEST_F(StreamRelayTest, ADrainedWorkerTellsEveryRankAndTheirStreamsEndCleanly) {
  Worker w;
  const auto r = relay();
  std::vector<std::unique_ptr<WorkerClient>> clients;
  std::vector<std::unique_ptr<BatchCall>> calls;
  std::atomic<int> told{0};
  for (int i = 0; i < 3; ++i) {
    clients.push_back(make_worker_client(w.target(), {}, r->address()));
    BatchCall* call = calls.emplace_back(clients.back()->stream()).get();
    call->on_leaving([&told, call](const std::string& why) {
      EXPECT_EQ(why, "test drain");
      ++told;
      call->writes_done();  // as the feed's writer does once its scheduler lets the worker go
    });
    ASSERT_TRUE(call->write(rank_request(i, 0)));
    ASSERT_TRUE(call->read());
  }
  w.server.drain(10, "test drain");
  for (auto& call : calls) {
    EXPECT_FALSE(call->read());
    EXPECT_TRUE(call->finish().ok());
  }
  EXPECT_EQ(told, 3);
}

TEST_F(StreamRelayTest, AWorkerThatDiesEndsEveryRanksStreamWithARetryableStatus) {
  auto w = std::make_unique<Worker>();
  const auto r = relay();
  std::vector<std::unique_ptr<WorkerClient>> clients;
  std::vector<std::unique_ptr<BatchCall>> calls;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(make_worker_client(w->target(), {}, r->address()));
    calls.push_back(clients.back()->stream());
    ASSERT_TRUE(calls.back()->write(rank_request(i, 0)));
    ASSERT_TRUE(calls.back()->read());
  }
  w.reset();
  for (auto& call : calls) {
    while (call->read()) {
    }
    EXPECT_EQ(call->finish().kind, CallStatus::Kind::kTransient) << "the feed retries the worker, as on a direct stream";
  }
}

TEST_F(StreamRelayTest, AStreamWithoutAWorkerOrTheTokenIsRefused) {
  SecurityOptions job;
  job.token = "s3cret";
  Worker w({}, tandem::testing::small_data(), job);
  const auto r = relay(job);
  auto refused = [&](const std::string& token, bool name_worker) {
    auto channel = grpc::CreateChannel(r->address(), grpc::InsecureChannelCredentials());
    auto stub = v1::DataService::NewStub(channel);
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    if (name_worker) ctx.AddMetadata("tandem-upstream", w.target());
    auto rw = stub->StreamBatches(&ctx);
    v1::Batch b;
    while (rw->Read(&b)) {
    }
    return rw->Finish();
  };
  const grpc::Status no_token = refused("", true);
  EXPECT_EQ(no_token.error_code(), grpc::StatusCode::UNAUTHENTICATED) << no_token.error_message();
  const grpc::Status no_worker = refused("s3cret", false);
  EXPECT_EQ(no_worker.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(no_worker.error_message().find("tandem-upstream"), std::string::npos) << no_worker.error_message();
  // With both, the relay's stream to the worker carries the job's token.
  auto client = make_worker_client(w.target(), job, r->address());
  auto call = client->stream();
  ASSERT_TRUE(call->write(rank_request(0, 0)));
  EXPECT_TRUE(call->read());
}

// A simulated job whose hosts' ranks share their streams: it trains every sample of each
// epoch exactly once, and each host's relay held one stream per worker.
TEST_F(StreamRelayTest, ASimulatedJobThroughEachHostsRelayAuditsClean) {
  const auto log = dir_ / "simulate.log";
  ASSERT_EQ(tandem::testing::run_tandem("simulate --procs-per-host 2 --worker-hosts 2 --share-streams on --epochs 1"
                                        " --dataset-size 96 --batch-size 8 --audit-samples --run-dir " +
                                            (dir_ / "run").string() + " --summary-json " + (dir_ / "s.json").string(),
                                        log, 240),
            0)
      << tandem::testing::slurp(log);
  const std::string out = tandem::testing::slurp(log);
  EXPECT_NE(out.find("ranks share one stream to each data worker"), std::string::npos) << out;
  EXPECT_NE(out.find("at most 2 streams to data workers at once"), std::string::npos) << out;
  const auto s = nlohmann::json::parse(tandem::testing::slurp(dir_ / "s.json"));
  EXPECT_EQ(s["sample_audit"]["missing"], 0) << s["sample_audit"].dump(2);
  EXPECT_EQ(s["sample_audit"]["duplicated"], 0) << s["sample_audit"].dump(2);
  EXPECT_EQ(s["steps"], 6);
}

}  // namespace
}  // namespace tandem::transport
