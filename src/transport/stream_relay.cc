#include "tandem/transport/stream_relay.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "batch_method.h"
#include "channel.h"
#include "relay_streams.h"
#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/transport/credentials.h"

namespace tandem::transport {

struct StreamRelay::Impl final : v1::DataService::Service {
  explicit Impl(StreamRelayOptions o) : opts(std::move(o)), job(opts.security.job) {
    MarkMethodStreamed(stream_batches_method().index,
                       relay_handler(this, [this](grpc::ServerContext* ctx, RelayServerStream* rw) {
                         return relay(ctx, rw);
                       }));
  }

  grpc::Status relay(grpc::ServerContext* ctx, RelayServerStream* rw) {
    if (grpc::Status s = check_caller(*ctx, opts.security, job, false); !s.ok()) return s;
    const std::string target = upstream_of(*ctx);
    if (target.empty()) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "a stream to this host's stream relay must name its data worker (tandem-upstream)"};
    }
    const auto rank = std::make_shared<RankStream>();
    const std::shared_ptr<WorkerStream> worker = attach(target, job_ranks_of(*ctx), rank);
    ++rank_streams;
    std::thread reader([&] { read_requests(rw, *worker, rank); });
    grpc::Status status = write_batches(ctx, rw, *rank);
    end_rank_stream(ctx, rw, *rank, status);
    worker->detach(rank.get());
    reader.join();
    --rank_streams;
    return status;
  }

  // The worker's stream for `target`, a new one when there is none or it has ended.
  std::shared_ptr<WorkerStream> attach(const std::string& target, int job_ranks,
                                       const std::shared_ptr<RankStream>& rank) {
    std::lock_guard lock(mu);
    std::erase_if(retired, [](const auto& w) { return w.use_count() == 1 && w->ended(); });
    std::shared_ptr<WorkerStream>& worker = workers[target];
    if (!worker || !worker->attach(rank)) {
      if (worker) retired.push_back(std::move(worker));
      auto& channel = channels[target];
      if (!channel) channel = make_worker_channel(target, opts.security);
      worker = std::make_shared<WorkerStream>(channel, opts.security, job_ranks);
      worker->attach(rank);
      int open = 0;
      for (const auto& [t, w] : workers) open += w->ended() ? 0 : 1;
      for (const auto& w : retired) open += w->ended() ? 0 : 1;
      worker_streams_peak = std::max(worker_streams_peak.load(), open);
    }
    return worker;
  }

  // Every second: the workers' streams idle for opts.linger_s end, and those that ended go.
  void close_idle_streams() {
    std::unique_lock lock(mu);
    while (!stopping) {
      tick.wait_for(lock, std::chrono::seconds(1));
      const auto before = RelayClock::now() - std::chrono::duration_cast<RelayClock::duration>(
                                             std::chrono::duration<double>(opts.linger_s));
      for (auto it = workers.begin(); it != workers.end();) {
        if (it->second->close_if_idle(before) || it->second->ended()) {
          retired.push_back(std::move(it->second));
          it = workers.erase(it);
        } else {
          ++it;
        }
      }
      std::erase_if(retired, [](const auto& w) { return w.use_count() == 1 && w->ended(); });
    }
  }

  static void read_requests(RelayServerStream* rw, WorkerStream& worker, const std::shared_ptr<RankStream>& rank) {
    grpc::ByteBuffer raw;
    try {
      while (rw->Read(&raw)) {
        if (!worker.send(rank, parse_request(raw))) break;
      }
    } catch (const PeerError& e) {
      rank->end({grpc::StatusCode::INVALID_ARGUMENT, std::string("stream relay: ") + e.what()});
    }
    {
      std::lock_guard lock(rank->mu);
      rank->requests_done = true;
    }
    rank->cv.notify_all();
  }

  // Writes what the worker answers until the rank has all it asked for, the worker's
  // stream ends (its status), the rank goes away or the relay stops.
  grpc::Status write_batches(grpc::ServerContext* ctx, RelayServerStream* rw, RankStream& rank) {
    for (;;) {
      std::unique_lock lock(rank.mu);
      rank.cv.wait_for(lock, std::chrono::milliseconds(200), [&] {
        return !rank.ready.empty() || rank.ended || (rank.requests_done && rank.pending == 0);
      });
      if (!rank.ready.empty()) {
        RelayedBatch batch = std::move(rank.ready.front());
        rank.ready.pop_front();
        lock.unlock();
        if (!rw->Write(batch)) return {grpc::StatusCode::CANCELLED, "the rank went away"};
        ++batches;
        continue;
      }
      if (rank.ended) return *rank.ended;
      if (rank.requests_done && rank.pending == 0) return grpc::Status::OK;
      lock.unlock();
      if (ctx->IsCancelled() || stopping) return {grpc::StatusCode::CANCELLED, "the stream relay stops"};
    }
  }

  // The rank's request reader must end before the call does. A rank whose worker left
  // (told, so it ends its requests) or refused in-band (told why, final) gets
  // opts.end_wait_s to end them; a rank whose worker failed is cut at once, so that it
  // retries (it reads CANCELLED, which it retries like the worker's own failure).
  void end_rank_stream(grpc::ServerContext* ctx, RelayServerStream* rw, RankStream& rank, grpc::Status& status) {
    const auto requests_done = [&rank] {
      std::lock_guard lock(rank.mu);
      return rank.requests_done;
    };
    if (requests_done()) return;
    const bool told = status.ok() || !transient(status);
    if (!status.ok() && told) {
      RelayedBatch refusal;
      refusal.header.set_error(status.error_message());
      rw->Write(refusal);
    }
    if (told) {
      std::unique_lock lock(rank.mu);
      rank.cv.wait_for(lock, std::chrono::duration<double>(opts.end_wait_s), [&] { return rank.requests_done; });
    }
    if (!requests_done()) {
      if (status.ok()) status = {grpc::StatusCode::CANCELLED, "the worker's stream ended"};
      spdlog::debug("stream relay: cutting a rank's stream: {}", describe(status));
      ctx->TryCancel();
    }
  }

  StreamRelayOptions opts;
  WorkerJob job;
  std::unique_ptr<grpc::Server> server;
  std::string address;
  std::string own_dir;  // made for the socket (options without a socket_path); "" = none
  std::atomic<bool> stopping{false};
  std::atomic<int> rank_streams{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<int> worker_streams_peak{0};
  std::condition_variable tick;  // wakes close_idle_streams to stop
  std::thread idle_closer;
  std::mutex mu;
  std::map<std::string, std::shared_ptr<WorkerStream>> workers;         // GUARDED_BY(mu)
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels;       // GUARDED_BY(mu)
  std::vector<std::shared_ptr<WorkerStream>> retired;                   // GUARDED_BY(mu): ending
};

namespace {

// A directory only this user may enter, for the relay's socket.
std::string private_directory() {
  const std::filesystem::path tmp = std::filesystem::temp_directory_path();
  std::string dir = (tmp / "tandem-relay-XXXXXX").string();
  if (!::mkdtemp(dir.data())) {
    throw ConfigError("cannot make a directory for the stream relay in " + tmp.string() + ": " +
                      std::strerror(errno) + "; set TMPDIR to a writable directory, or pass --share-streams off");
  }
  return dir;
}

}  // namespace

StreamRelay::StreamRelay(StreamRelayOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {
  if (impl_->opts.socket_path.empty()) {
    impl_->own_dir = private_directory();
    impl_->opts.socket_path = impl_->own_dir + "/relay.sock";
  }
  impl_->address = "unix:" + impl_->opts.socket_path;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(impl_->address, grpc::InsecureServerCredentials());
  builder.RegisterService(impl_.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(-1);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server) {
    if (!impl_->own_dir.empty()) std::filesystem::remove_all(impl_->own_dir);
    throw NetworkError("the stream relay cannot listen on " + impl_->address +
                       ": check that its directory exists and is writable, or pass --share-streams off");
  }
  impl_->idle_closer = std::thread([impl = impl_.get()] { impl->close_idle_streams(); });
}

StreamRelay::~StreamRelay() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->tick.notify_all();
  impl_->idle_closer.join();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  std::lock_guard lock(impl_->mu);
  impl_->workers.clear();  // each joins its reader
  impl_->retired.clear();
  if (!impl_->own_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(impl_->own_dir, ec);
  }
}

std::string StreamRelay::address() const { return impl_->address; }

StreamRelay::Stats StreamRelay::stats() const {
  Stats s;
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& [target, worker] : impl_->workers) s.worker_streams += worker->ended() ? 0 : 1;
  }
  s.rank_streams = impl_->rank_streams.load();
  s.batches = impl_->batches.load();
  s.worker_streams_peak = impl_->worker_streams_peak.load();
  return s;
}

}  // namespace tandem::transport
