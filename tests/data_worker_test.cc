// The data worker's logic without a network (transport/data_worker.h): what it serves,
// its limits, backpressure and the end of a stream; and the one seam into gRPC's
// internals (batch_method.h), against the generated stub.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "../src/transport/batch_method.h"
#include "tandem/common/error.h"
#include "tandem/data/batching/batch_maker.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/transport/data_worker.h"
#include "tandem/v1/data.grpc.pb.h"
#include "worker_fixture.h"

namespace tandem::transport {
namespace {

using namespace std::chrono_literals;
using tandem::testing::small_data;

constexpr uint64_t kSampleBytes = 3 * 16 * 16 * 4;  // small_data(): 3x16x16 float32

data::BatchRequest asking(uint64_t sequence, std::vector<uint64_t> indices) {
  data::BatchRequest r;
  r.sequence = sequence;
  r.indices = std::move(indices);
  return r;
}

std::vector<uint64_t> first(uint64_t n) {
  std::vector<uint64_t> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

struct Fixture {
  explicit Fixture(WorkerOptions o = options()) : dataset(data::make_dataset(small_data())), worker(dataset, o, "host-a") {}
  static WorkerOptions options() {
    WorkerOptions o;
    o.threads = 2;
    o.max_inflight_mb = 16;
    return o;
  }
  // The next batch, within 10 s.
  std::optional<ServedBatch> next(BatchStream& s, bool* done) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    *done = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto b = s.next(100ms, done); b || *done) return b;
    }
    ADD_FAILURE() << "no batch within 10 s";
    return std::nullopt;
  }
  std::shared_ptr<const data::Dataset> dataset;
  DataWorker worker;
};

// A worker with 1 MiB for batches in flight, and a request that fills it (once).
WorkerOptions one_mib() {
  WorkerOptions o = Fixture::options();
  o.max_inflight_mb = 1;
  o.max_request_samples = 1000;
  return o;
}
constexpr uint64_t kFillsOneMib = (1 << 20) / (kSampleBytes + sizeof(int64_t)) - 1;

// A stream whose first request holds all of a one_mib() worker's memory.
std::unique_ptr<BatchStream> holding_the_mib(DataWorker& worker) {
  auto s = worker.open_stream();
  EXPECT_TRUE(s->request(asking(0, first(kFillsOneMib))));
  return s;
}

// Another request for all of it, on a thread of its own: it may have to wait.
std::future<bool> ask_for_the_mib(BatchStream& s, uint64_t sequence) {
  return std::async(std::launch::async, [&s, sequence] { return s.request(asking(sequence, first(kFillsOneMib))); });
}

// The error a stream's next() throws, within 10 s; "" if none.
std::string stream_error(BatchStream& s) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool done = false;
  try {
    while (std::chrono::steady_clock::now() < deadline && !done) s.next(100ms, &done);
  } catch (const Overloaded& e) {
    return std::string("Overloaded: ") + e.what();
  } catch (const PeerError& e) {
    return std::string("PeerError: ") + e.what();
  } catch (const NetworkError& e) {
    return std::string("NetworkError: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
  return "";
}

TEST(DataWorker, DescribesItsDataset) {
  Fixture f;
  const WorkerInfo info = f.worker.describe();
  EXPECT_EQ(info.dataset.name, "synthetic");
  EXPECT_EQ(info.dataset.size, 400u);
  EXPECT_EQ(info.dataset.fingerprint, f.dataset->info().fingerprint);
  EXPECT_EQ(info.dataset.sample_shape, (std::vector<int64_t>{3, 16, 16}));
  EXPECT_EQ(info.threads, 2);
  EXPECT_EQ(info.host, "host-a");
}

TEST(DataWorker, ServesEachRequestThenEndsTheStream) {
  Fixture f;
  auto stream = f.worker.open_stream();
  EXPECT_EQ(f.worker.open_streams(), 1);
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(stream->request(asking(i, {i, i + 10, i + 20})));
  stream->end_requests();
  data::BatchMaker local(f.dataset, nullptr);
  std::vector<bool> seen(5);
  for (int k = 0; k < 5; ++k) {
    bool done = false;
    std::optional<ServedBatch> b = f.next(*stream, &done);
    ASSERT_TRUE(b) << "batch " << k;
    const uint64_t seq = b->batch().sequence;
    ASSERT_LT(seq, 5u);
    seen[seq] = true;
    const data::Batch expected = local.make(asking(seq, {seq, seq + 10, seq + 20}));
    EXPECT_EQ(b->batch().labels, expected.labels);
    EXPECT_EQ(b->batch().data, expected.data);
  }
  EXPECT_EQ(seen, std::vector<bool>(5, true));
  bool done = false;
  EXPECT_FALSE(f.next(*stream, &done));
  EXPECT_TRUE(done) << "every request answered after end_requests: the stream is done";
  stream.reset();
  EXPECT_EQ(f.worker.open_streams(), 0);
}

TEST(DataWorker, RequestsOverItsLimitsEndTheStreamNamingTheLimit) {
  WorkerOptions o = Fixture::options();
  o.max_request_samples = 8;
  o.max_inflight_mb = 1;
  Fixture f(o);
  {
    auto s = f.worker.open_stream();
    EXPECT_FALSE(s->request(asking(0, {})));
    EXPECT_NE(stream_error(*s).find("PeerError: a request for 0 samples"), std::string::npos);
  }
  {
    auto s = f.worker.open_stream();
    EXPECT_FALSE(s->request(asking(0, first(9))));
    const std::string e = stream_error(*s);
    EXPECT_EQ(e.rfind("Overloaded:", 0), 0u) << e;
    EXPECT_NE(e.find("--max-request-samples"), std::string::npos) << e;
    EXPECT_FALSE(s->request(asking(1, first(2)))) << "a failed stream takes nothing more";
  }
  {
    o.max_request_samples = 1000;
    Fixture big(o);
    auto s = big.worker.open_stream();
    const uint64_t over_a_mib = (1 << 20) / kSampleBytes + 1;
    EXPECT_FALSE(s->request(asking(0, first(over_a_mib))));
    const std::string e = stream_error(*s);
    EXPECT_NE(e.find("--max-inflight-mb"), std::string::npos) << e;
  }
  // A bad sample index fails the stream with the dataset's own error.
  auto s = f.worker.open_stream();
  EXPECT_TRUE(s->request(asking(0, {5, 4000})));
  EXPECT_NE(stream_error(*s).find("4000"), std::string::npos);
}

TEST(DataWorker, StreamsBeyondMaxStreamsAreRefusedUntilOneCloses) {
  WorkerOptions o = Fixture::options();
  o.max_streams = 2;
  Fixture f(o);
  auto a = f.worker.open_stream();
  auto b = f.worker.open_stream();
  try {
    f.worker.open_stream();
    ADD_FAILURE() << "a third stream was opened";
  } catch (const Overloaded& e) {
    EXPECT_NE(std::string(e.what()).find("--max-streams"), std::string::npos) << e.what();
  }
  a.reset();
  EXPECT_NO_THROW(f.worker.open_stream());
}

// A job of more ranks than --max-streams (issue 37: 96 ranks, 64 streams): each of its
// ranks gets a stream, and the limit counts beyond them.
TEST(DataWorker, EveryRankOfTheJobGetsAStreamBeyondMaxStreams) {
  WorkerOptions o = Fixture::options();
  o.max_streams = 2;
  Fixture f(o);
  std::vector<std::unique_ptr<BatchStream>> open;
  for (int rank = 0; rank < 6; ++rank) open.push_back(f.worker.open_stream({}, /*job_ranks=*/4));
  try {
    f.worker.open_stream({}, 4);
    ADD_FAILURE() << "a seventh stream was opened: --max-streams 2 beyond the job's 4 ranks is 6";
  } catch (const Overloaded& e) {
    EXPECT_NE(std::string(e.what()).find("beyond one per rank of its job's 4"), std::string::npos) << e.what();
  }
}

// A large claim lifts the limit only while its stream is open (the hostile run's 600
// streams saying 65,536 ranks left every later caller unlimited).
TEST(DataWorker, AClaimOfManyRanksLastsOnlyAsLongAsItsStream) {
  WorkerOptions o = Fixture::options();
  o.max_streams = 2;
  Fixture f(o);
  auto big = f.worker.open_stream({}, /*job_ranks=*/100);
  std::vector<std::unique_ptr<BatchStream>> open;
  for (int i = 0; i < 5; ++i) open.push_back(f.worker.open_stream());
  big.reset();
  open.clear();
  auto a = f.worker.open_stream();
  auto b = f.worker.open_stream();
  EXPECT_THROW(f.worker.open_stream(), Overloaded) << "the closed stream's claim still lifted the limit";
}

// One request fills the worker's 1 MiB for batches in flight; the next waits until the
// first batch is handed out and dropped (written, in the server).
TEST(DataWorker, ARequestWaitsForMemoryUntilABatchIsWritten) {
  Fixture f(one_mib());
  auto s = holding_the_mib(f.worker);
  auto second = ask_for_the_mib(*s, 1);
  bool done = false;
  std::optional<ServedBatch> b = f.next(*s, &done);
  ASSERT_TRUE(b);
  EXPECT_EQ(second.wait_for(300ms), std::future_status::timeout) << "admitted while the first batch holds the memory";
  b.reset();  // written: its bytes come back
  ASSERT_EQ(second.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(second.get());
  std::optional<ServedBatch> c = f.next(*s, &done);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->batch().sequence, 1u);
}

// A stream dropped with batches unwritten gives their memory back to the worker: the
// next stream's request for the whole allowance is admitted.
TEST(DataWorker, AClosedStreamGivesItsMemoryBack) {
  Fixture f(one_mib());
  holding_the_mib(f.worker);  // dropped with its batch made or in the making
  auto s = f.worker.open_stream();
  auto admitted = ask_for_the_mib(*s, 2);
  if (admitted.wait_for(10s) != std::future_status::ready) {
    s->close();  // unblocks it, so the test ends
    ADD_FAILURE() << "the closed stream's bytes were never returned";
  }
  EXPECT_TRUE(admitted.get());
}

TEST(DataWorker, CloseWakesARequestWaitingForMemory) {
  Fixture f(one_mib());
  auto s = holding_the_mib(f.worker);
  auto waiting = ask_for_the_mib(*s, 1);
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout);
  s->close();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(waiting.get());
}

TEST(DataWorker, AStreamThatAsksNothingIsClosedAfterTheIdleTimeout) {
  WorkerOptions o = Fixture::options();
  o.idle_timeout_s = 0.3;
  Fixture f(o);
  auto s = f.worker.open_stream();
  const std::string e = stream_error(*s);
  EXPECT_EQ(e.rfind("NetworkError:", 0), 0u) << e;
  EXPECT_NE(e.find("--idle-timeout"), std::string::npos) << e;
}

// A client that asks and never reads: the batch handed to the writer is never taken.
// After --idle-timeout the stream is closed, its hook cancels the call, its memory comes
// back, and its end does not count as activity.
TEST(DataWorker, AStreamWhosePeerTakesNoBatchIsClosedAfterTheIdleTimeout) {
  WorkerOptions o = one_mib();
  o.idle_timeout_s = 0.3;
  Fixture f(o);
  std::atomic<int> cancelled{0};
  auto stalled = f.worker.open_stream([&] { ++cancelled; });
  auto taking = f.worker.open_stream([] { ADD_FAILURE() << "a stream whose batches are taken was closed"; });
  ASSERT_TRUE(stalled->request(asking(0, first(kFillsOneMib / 2))));
  ASSERT_TRUE(taking->request(asking(1, {1})));
  bool done = false;
  std::optional<ServedBatch> never_written = f.next(*stalled, &done);
  ASSERT_TRUE(never_written);
  ASSERT_TRUE(f.next(*taking, &done));
  taking->written();
  EXPECT_EQ(f.worker.close_stalled_streams(), 0) << "closed before --idle-timeout";
  const auto active = f.worker.last_activity();
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(f.worker.close_stalled_streams(), 1);
  EXPECT_EQ(cancelled.load(), 1);
  const std::string e = stream_error(*stalled);
  EXPECT_NE(e.find("took no batch"), std::string::npos) << e;
  EXPECT_EQ(f.worker.close_stalled_streams(), 0) << "closed twice";
  never_written.reset();  // the write the cancelled call was blocked in returns
  stalled.reset();
  EXPECT_EQ(f.worker.last_activity(), active) << "a stalled client's end counted as activity";
  // Its memory is back: a request for most of the MiB is admitted at once.
  auto next = f.worker.open_stream();
  auto admitted = ask_for_the_mib(*next, 2);
  ASSERT_EQ(admitted.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(admitted.get());
}

TEST(BatchMethod, IsDataProtosStreamBatches) {
  EXPECT_EQ(stream_batches_method().path, "/tandem.v1.DataService/StreamBatches");
  const auto* service = v1::BatchRequest::descriptor()->file()->FindServiceByName("DataService");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->method(stream_batches_method().index)->name(), "StreamBatches");
}

// The generated stub and the copy-free server agree on the method and the bytes.
TEST(BatchMethod, AGeneratedStubReadsTheCopyFreeStream) {
  testing::InProcessWorker w;
  auto stub = v1::DataService::NewStub(grpc::CreateChannel(w.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto rw = stub->StreamBatches(&ctx);
  v1::BatchRequest req;
  req.set_sequence(7);
  for (uint64_t i : {3, 1, 4}) req.add_indices(i);
  ASSERT_TRUE(rw->Write(req));
  rw->WritesDone();
  v1::Batch reply;
  ASSERT_TRUE(rw->Read(&reply));
  EXPECT_TRUE(rw->Finish().ok());
  const data::Batch expected = data::BatchMaker(data::make_dataset(small_data()), nullptr).make(asking(7, {3, 1, 4}));
  EXPECT_EQ(reply.header().sequence(), 7u);
  ASSERT_EQ(reply.data().size(), expected.data.size());
  EXPECT_EQ(0, std::memcmp(reply.data().data(), expected.data.data(), expected.data.size()));
}

// Bytes that are not a BatchRequest end the stream with INVALID_ARGUMENT and the reason,
// in-band and as the status: gRPC's Read says false alike for them and for the end of
// the stream, which used to end the call with OK.
TEST(BatchMethod, GarbageOnTheStreamEndsItWithInvalidArgument) {
  testing::InProcessWorker w;
  auto channel = grpc::CreateChannel(w.target(), grpc::InsecureChannelCredentials());
  for (const std::string& garbage : {std::string("\x0a\x05" "ab"), std::string(11, '\xff')}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    const grpc::internal::RpcMethod method(stream_batches_method().path.c_str(),
                                           grpc::internal::RpcMethod::BIDI_STREAMING, channel);
    std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> rw(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), method,
                                                                                               &ctx));
    grpc::Slice slice(garbage);
    ASSERT_TRUE(rw->Write(grpc::ByteBuffer(&slice, 1)));
    rw->WritesDone();
    grpc::ByteBuffer raw;
    std::string in_band;
    while (rw->Read(&raw)) {
      v1::Batch reply;
      ASSERT_TRUE(grpc::SerializationTraits<v1::Batch>::Deserialize(&raw, &reply).ok());
      in_band += reply.header().error();
    }
    const grpc::Status status = rw->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_NE(status.error_message().find("not a tandem.v1.BatchRequest"), std::string::npos) << status.error_message();
    EXPECT_NE(in_band.find("not a tandem.v1.BatchRequest"), std::string::npos) << in_band;
  }
  EXPECT_FALSE(w.stopped());
}

}  // namespace
}  // namespace tandem::transport
