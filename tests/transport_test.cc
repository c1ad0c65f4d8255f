// Real workers on loopback port 0, real gRPC streams.
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/batching/sampler.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/feed/rank_feed.h"
#include "tandem/feed/worker_link.h"
#include "tandem/transport/batch_codec.h"
#include "tandem/transport/worker_client.h"
#include "tandem/transport/worker_server.h"
#include "worker_fixture.h"

namespace tandem::transport {
namespace {

using namespace std::chrono_literals;

using tandem::testing::ready_client;
using tandem::testing::small_data;
using Worker = tandem::testing::InProcessWorker;

TEST(Transport, WorkerAnswersHealthChecksAndInfo) {
  Worker w;
  auto channel = grpc::CreateChannel(w.target(), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  auto remote = ready_client(w.target());
  const WorkerInfo info = remote->info(5);
  EXPECT_EQ(info.dataset.name, "synthetic");
  EXPECT_EQ(info.dataset.size, 400u);
  EXPECT_EQ(info.dataset.fingerprint, data::make_dataset(small_data())->info().fingerprint);
  EXPECT_EQ(info.threads, 2);
  EXPECT_EQ(info.host, "test-worker");
}

TEST(Transport, StreamedBatchesEqualLocallyMadeOnes) {
  Worker w;
  auto ds = data::make_dataset(small_data());
  data::Sampler sampler(ds->info().size, 8, 0);
  feed::Scheduler sched([&](uint64_t s) { return sampler.request(s); }, {30, 8, 20});
  feed::WorkerLink remote(ready_client(w.target()), sched, ds->info(), {.inflight = 3});
  remote.start(false);
  data::BatchMaker local(ds, nullptr);
  for (uint64_t i = 0; i < 30; ++i) {
    auto b = sched.next();
    ASSERT_TRUE(b);
    const data::Batch expected = local.make(sampler.request(i));
    EXPECT_EQ(b->sequence, i);
    EXPECT_EQ(b->shape, expected.shape);
    EXPECT_EQ(b->labels, expected.labels);
    ASSERT_EQ(b->data, expected.data) << "batch " << i;
  }
  sched.close();
  remote.stop();
  EXPECT_EQ(sched.stats()[0].batches, 30u);
  EXPECT_FALSE(sched.stats()[0].failed);
}

// A batch's digest is computed where it is made and travels with it: the trainer compares
// copies by it without hashing 19 MB batches on its own cores (issue 34).
TEST(Transport, ABatchArrivesWithTheDigestItsMakerComputed) {
  Worker w;
  auto ds = data::make_dataset(small_data());
  data::Sampler sampler(ds->info().size, 8, 0);
  feed::Scheduler sched([&](uint64_t s) { return sampler.request(s); }, {4, 4, 20});
  feed::WorkerLink remote(ready_client(w.target()), sched, ds->info(), {.inflight = 2});
  remote.start(false);
  data::BatchMaker local(ds, nullptr);
  for (uint64_t i = 0; i < 4; ++i) {
    auto b = sched.next();
    ASSERT_TRUE(b);
    ASSERT_TRUE(b->digest.has_value()) << "batch " << i << " came without its digest";
    EXPECT_EQ(*b->digest, data::batch_digest(*b)) << "the digest is of the bytes that came";
    EXPECT_EQ(*b->digest, *local.make(sampler.request(i)).digest);
  }
  sched.close();
  remote.stop();
}

TEST(Transport, ALostWorkersRequestsAreServedByTheOther) {
  auto doomed = std::make_unique<Worker>();
  Worker survivor;
  auto ds = data::make_dataset(small_data());
  data::Sampler sampler(ds->info().size, 8, 0);
  feed::Scheduler sched([&](uint64_t s) { return sampler.request(s); }, {60, 8, 20});
  feed::WorkerLink a(ready_client(doomed->target()), sched, ds->info(), {.inflight = 4});
  feed::WorkerLink b(ready_client(survivor.target()), sched, ds->info(), {.inflight = 4});
  a.start(false);
  b.start(false);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(sched.next()->sequence, i);
  doomed.reset();  // the worker process goes away mid-stream
  data::BatchMaker local(ds, nullptr);
  for (uint64_t i = 10; i < 60; ++i) {
    auto batch = sched.next();
    ASSERT_TRUE(batch);
    ASSERT_EQ(batch->sequence, i);
    ASSERT_EQ(batch->data, local.make(sampler.request(i)).data);
  }
  sched.close();
  a.stop();
  b.stop();
  const auto stats = sched.stats();
  EXPECT_TRUE(stats[0].failed);
  EXPECT_FALSE(stats[1].failed);
  EXPECT_EQ(stats[0].batches + stats[1].batches, 60u);
}

TEST(Transport, ABadRequestFailsTheSourceWithTheReason) {
  Worker w;
  feed::Scheduler sched([](uint64_t s) { return data::BatchRequest{s, 0, {100000}}; }, {1, 1, 10});
  feed::WorkerLink remote(ready_client(w.target()), sched, data::make_dataset(small_data())->info(), {.inflight = 1});
  remote.start(false);
  try {
    sched.next();
    FAIL() << "expected an error";
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("outside dataset"), std::string::npos) << e.what();
  }
  remote.stop();
}

TEST(Transport, ShutdownRpcStopsTheWorker) {
  DataOptions data = small_data();
  WorkerServer server(data::make_dataset(data), WorkerOptions{}, "w");
  const int port = server.start("127.0.0.1:0");
  auto waiter = std::async(std::launch::async, [&] { return server.wait(); });
  auto remote = ready_client("127.0.0.1:" + std::to_string(port));
  EXPECT_TRUE(remote->shutdown("test over", 5).ok());
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waiter.get(), StopReason::kShutdownRpc);
}

TEST(Transport, AWorkerNobodyTalksToGivesUp) {
  WorkerOptions opts;
  opts.idle_timeout_s = 0.5;
  WorkerServer server(data::make_dataset(small_data()), opts, "w");
  server.start("127.0.0.1:0");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.wait(), StopReason::kIdle);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Transport, WaitingForAnAbsentWorkerHasADeadline) {
  feed::FeedOptions opts;
  opts.data = small_data();
  opts.workers = {"127.0.0.1:1"};  // nothing listens on port 1
  opts.connect_timeout_s = 1.0;
  const std::atomic<bool> stop{false};
  feed::RankFeed feed(opts, stop);
  const auto start = std::chrono::steady_clock::now();
  try {
    feed.start(10, 0, 0);
    FAIL();
  } catch (const NetworkError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--connect-timeout"), std::string::npos);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Transport, ABusyPortIsAClearError) {
  Worker w;
  WorkerServer second(data::make_dataset(small_data()), WorkerOptions{}, "w2");
  EXPECT_THROW(second.start("127.0.0.1:" + std::to_string(w.port)), ConfigError) << "a taken port is the job's configuration (exit 3)";
}

}  // namespace
}  // namespace tandem::transport

namespace tandem::transport {
namespace {

// A trainer that disconnects mid-stream must not leave the worker unable to serve the
// next one (e.g. a restarted trainer, or `tandem bench feed`'s phases).
TEST(Transport, AWorkerServesANewStreamAfterTheLastOneWasCancelled) {
  Worker w;
  auto ds = data::make_dataset(small_data());
  data::Sampler sampler(ds->info().size, 8, 0);
  for (int round = 0; round < 3; ++round) {
    feed::Scheduler sched([&](uint64_t s) { return sampler.request(s); }, {1000, 8, 10});
    feed::WorkerLink remote(ready_client(w.target()), sched, ds->info(), {.inflight = 4});
    remote.start(false);
    for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(sched.next()) << "round " << round;
    sched.close();
    remote.stop();
  }
}

}  // namespace
}  // namespace tandem::transport

namespace tandem::transport {
namespace {

uint64_t pull(const std::vector<std::string>& targets, int batches, std::vector<uint64_t>* per_source) {
  auto ds = data::make_dataset(small_data());
  data::Sampler sampler(ds->info().size, 8, 0);
  feed::Scheduler sched([&](uint64_t s) { return sampler.request(s); }, {100000, 16, 20});
  std::vector<std::unique_ptr<feed::WorkerLink>> remotes;
  for (const auto& t : targets) {
    remotes.push_back(
        std::make_unique<feed::WorkerLink>(ready_client(t), sched, ds->info(), feed::LinkOptions{.inflight = 4}));
    remotes.back()->start(false);
  }
  uint64_t n = 0;
  for (int i = 0; i < batches; ++i) n += sched.next() ? 1 : 0;
  sched.close();
  for (auto& r : remotes) r->stop();
  if (per_source) for (const auto& s : sched.stats()) per_source->push_back(s.batches);
  return n;
}

TEST(Transport, TwoWorkersBothServeAfterEachServedAlone) {
  Worker a, b;
  EXPECT_EQ(pull({a.target()}, 40, nullptr), 40u);
  EXPECT_EQ(pull({b.target()}, 40, nullptr), 40u);
  std::vector<uint64_t> shares;
  EXPECT_EQ(pull({a.target(), b.target()}, 200, &shares), 200u);
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_GT(shares[0], 20u) << "a served " << shares[0] << ", b " << shares[1];
  EXPECT_GT(shares[1], 20u) << "a served " << shares[0] << ", b " << shares[1];
}

}  // namespace
}  // namespace tandem::transport

namespace tandem::transport {
namespace {

// A worker whose batches do not fit the trainer's dataset (another image size, labels
// beyond its classes) is dropped with the reason; the good worker serves every batch.
TEST(Transport, AWorkerSendingMalformedBatchesIsDroppedAndTheOthersServe) {
  DataOptions wrong = small_data();
  wrong.image_size = 8;
  for (const bool bad_labels : {false, true}) {
    Worker good;
    Worker bad(WorkerOptions{}, bad_labels ? small_data() : wrong);
    auto ds = data::make_dataset(small_data());
    data::DatasetInfo expect = ds->info();
    if (bad_labels) expect.num_classes = 1;  // the bad worker's labels now fall outside
    data::Sampler sampler(ds->info().size, 8, 0);
    feed::Scheduler sched([&](uint64_t s) { return sampler.request(s); }, {40, 8, 20});
    feed::WorkerLink a(ready_client(bad.target()), sched, expect, {.inflight = 4});
    feed::WorkerLink b(ready_client(good.target()), sched, ds->info(), {.inflight = 4});
    a.start(false);
    b.start(false);
    for (uint64_t i = 0; i < 40; ++i) {
      auto batch = sched.next();
      ASSERT_TRUE(batch);
      ASSERT_EQ(batch->sequence, i);
      if (!bad_labels) {
        ASSERT_EQ(data::batch_problem(*batch, ds->info()), "");
      }
    }
    sched.close();
    a.stop();
    b.stop();
    const auto stats = sched.stats();
    EXPECT_TRUE(stats[0].failed);
    EXPECT_NE(stats[0].error.find(bad_labels ? "outside the dataset's 1 classes" : "wrong sample shape"),
              std::string::npos)
        << stats[0].error;
    EXPECT_FALSE(stats[1].failed);
  }
}

}  // namespace
}  // namespace tandem::transport

namespace tandem::transport {
namespace {

// Found by tests/fuzz/batch_fuzz.cc: a 30-byte message whose length field claims 26 GB
// made the trainer allocate it. Lengths are now checked against the bytes that arrived.
TEST(BatchCodec, ALengthFieldLargerThanTheMessageIsRefusedWithoutAllocating) {
  const std::string bytes = "\x0a\xe4\xc5\xe5\x8c\x61" "ample%" + std::string(7, '\0') + "mps e\x7futside";
  grpc::Slice slice(bytes.data(), bytes.size());
  grpc::ByteBuffer buffer(&slice, 1);
  IncomingBatch msg;
  const grpc::Status st = grpc::SerializationTraits<IncomingBatch>::Deserialize(&buffer, &msg);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("claims more bytes"), std::string::npos) << st.error_message();
}

}  // namespace
}  // namespace tandem::transport
