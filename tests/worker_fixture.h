// An in-process data worker on a free loopback port, for tests of the data plane
// (transport_test.cc, security_test.cc): started in the constructor, stopped and joined in
// the destructor. And a gRPC client of a worker that answers its health check.
#pragma once

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "tandem/common/clock.h"
#include "tandem/data/core/dataset.h"
#include "tandem/data/core/options.h"
#include "tandem/data/sources/source_kinds.h"
#include "tandem/transport/options.h"
#include "tandem/transport/worker_client.h"
#include "tandem/transport/worker_server.h"

namespace tandem::testing {

// 400 synthetic 16x16 samples: small enough that tests run in milliseconds.
inline DataOptions small_data() {
  DataOptions d;
  d.image_size = 16;
  d.dataset_size = 400;
  return d;
}

struct InProcessWorker {
  explicit InProcessWorker(WorkerOptions opts = {}, DataOptions data = small_data(), SecurityOptions security = {},
                           const std::string& bind = "127.0.0.1:0")
      : server(data::make_dataset(data), with_threads(opts), "test-worker", data::DType::kFloat32,
               std::move(security)) {
    port = server.start(bind);
    waiter = std::async(std::launch::async, [this] { return server.wait(); });
  }
  ~InProcessWorker() {
    server.stop();
    waiter.wait();
  }
  static WorkerOptions with_threads(WorkerOptions o) {
    if (!o.threads) o.threads = 2;
    return o;
  }
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
  bool stopped() { return waiter.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

  transport::WorkerServer server;
  int port = 0;
  std::future<transport::StopReason> waiter;
};

// A gRPC client of the worker at `target` once its health check answers SERVING (the
// health check needs no token). Throws std::runtime_error naming the target and why after
// `seconds`: the test then fails with that message.
inline std::unique_ptr<transport::WorkerClient> ready_client(const std::string& target,
                                                             const SecurityOptions& security = {},
                                                             double seconds = 5) {
  auto client = transport::make_worker_client(target, security);
  const auto deadline = after(seconds);
  std::string why;
  while (!client->healthy(std::max(0.1, seconds_between(Clock::now(), deadline)), &why)) {
    if (Clock::now() >= deadline) {
      throw std::runtime_error("data worker " + target + " not healthy within " + std::to_string(seconds) +
                               " s: " + why);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return client;
}

// The batch the worker at `target` answers `request` with, over one stream of a ready
// client (60 s to become healthy). Throws std::runtime_error with the stream's status
// when it sends none.
inline data::Batch request_batch(const std::string& target, const data::BatchRequest& request) {
  auto client = ready_client(target, {}, 60);
  auto call = client->stream();
  if (!call->write(request)) throw std::runtime_error("could not send the request to " + target);
  call->writes_done();
  auto batch = call->read();
  if (!batch) throw std::runtime_error("no batch from " + target + ": " + call->finish().message);
  return std::move(*batch);
}

}  // namespace tandem::testing
