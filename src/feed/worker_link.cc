#include "tandem/feed/worker_link.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "tandem/common/error.h"
#include "tandem/common/text.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::feed {

std::string identity_problem(const transport::WorkerInfo& worker, const data::DatasetInfo& expected,
                             std::string_view who) {
  const data::DatasetInfo& theirs = worker.dataset;
  if (theirs.fingerprint == expected.fingerprint && theirs.size == expected.size) return "";
  if (std::string named = data::describe_difference(theirs.description, expected.description, who);
      !named.empty()) {
    return named;
  }
  return "dataset '" + printable(theirs.name, 80) + "' of " + std::to_string(theirs.size) + " samples, fingerprint " +
         printable(theirs.fingerprint, 40) + ", but " + std::string(who) + " expects '" + expected.name + "' of " +
         std::to_string(expected.size) + " samples, fingerprint " + expected.fingerprint +
         " (--data, --seed, --image-size, ...)";
}

data::DatasetInfo dataset_of(const transport::WorkerInfo& worker, const std::string& target) {
  data::DatasetInfo d = worker.dataset;
  d.name = printable(d.name, 80);
  d.fingerprint = printable(d.fingerprint, 80);
  if (const std::string problem = data::info_problem(d); !problem.empty()) {
    throw PeerError("data worker " + target + " (" + worker.host + ") describes its dataset with " + problem +
                    ", which a trainer cannot build a model on: run the same tandem version on every host");
  }
  return d;
}

WorkerLink::WorkerLink(std::unique_ptr<transport::WorkerClient> client, Scheduler& scheduler,
                       data::DatasetInfo expected, LinkOptions opts)
    : client_(std::move(client)),
      scheduler_(scheduler),
      expected_(std::move(expected)),
      opts_(opts),
      id_(scheduler_.add_source(client_->target(), opts_.inflight)) {}

WorkerLink::~WorkerLink() { stop(); }

void WorkerLink::start(bool absent) {
  finished_ = false;
  thread_ = std::thread([this, absent] {
    run(absent);
    finished_ = true;
  });
}

void WorkerLink::rejoin() {
  if (thread_.joinable()) thread_.join();
  leaving_ = false;
  bad_data_ = false;
  scheduler_.rejoin(id_, "data worker " + target() + " listed again, not answering yet");
  start(/*absent=*/true);
}

void WorkerLink::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (call_) call_->cancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WorkerLink::leave(const std::string& why, bool answers) {
  if (leaving_.exchange(true)) return;
  spdlog::info("data worker {} leaves the feed: {}; it answers what it holds", target(), why);
  scheduler_.leave(id_, why, answers);
  std::lock_guard lock(mu_);
  wake_.notify_all();
}

bool WorkerLink::pause(double s) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, std::chrono::duration<double>(s), [&] { return stopping_ || leaving_; });
  return !stopping_ && !leaving_;
}

// Streams until the work is done; a worker that drops out for a transient reason is
// retried with backoff and streams again once it is taken back. Its requests meanwhile
// go to the other sources.
void WorkerLink::run(bool absent) {
  Backoff backoff(opts_.backoff);
  std::string why = "data worker " + target() + (streamed_ ? " listed again, not answering yet" : " not answering at start");
  streamed_ = streamed_ || !absent;  // once: "joined"; after that "rejoined"
  if (absent) scheduler_.fail(id_, why, /*may_return=*/true);
  for (;;) {
    if (!absent) {
      const Outcome outcome = stream_once(why);
      if (outcome == Outcome::kDone) return;
      if (outcome == Outcome::kFinal || leaving_) {  // one that left is not retried
        spdlog::warn("{}; its requests go to the other sources", why);
        scheduler_.fail(id_, why, /*may_return=*/false, /*bad_data=*/bad_data_);
        return;
      }
      spdlog::warn("{}; its requests go to the other sources, retrying it", why);
      scheduler_.fail(id_, why, /*may_return=*/true);
    }
    absent = false;
    for (bool back = false; !back;) {
      if (!pause(backoff.next())) return;
      try {
        back = take_back();
      } catch (const ConfigError& e) {  // it answers, serving another dataset: never again
        spdlog::error("data worker {} came back: {}; not using it", target(), e.what());
        scheduler_.abandon(id_, e.what());
        return;
      }
    }
    if (leaving_) return;  // it left while being taken back
    spdlog::info("data worker {} {}", target(), streamed_ ? "rejoined" : "joined");
    scheduler_.revive(id_, /*rejoined=*/streamed_);
    streamed_ = true;
    backoff.reset();
  }
}

// One try: true once the worker answers its health check and serves the expected
// dataset; false when it does not answer (yet). Throws ConfigError when it answers with
// another dataset.
bool WorkerLink::take_back() {
  if (!client_->healthy(opts_.health_deadline_s)) return false;
  transport::WorkerInfo info;
  try {
    info = client_->info(opts_.info_deadline_s);
  } catch (const Error&) {
    return false;
  }
  if (const std::string problem = identity_problem(info, expected_); !problem.empty()) {
    throw ConfigError("it serves other data (" + problem + ")");
  }
  set_threads(static_cast<int>(info.threads));
  return true;
}

WorkerLink::Outcome WorkerLink::stream_once(std::string& why) {
  std::shared_ptr<transport::BatchCall> call;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Outcome::kDone;
    call_ = client_->stream();
    call = call_;
  }
  call->on_leaving([this](const std::string& why) { leave("data worker " + target() + " is leaving: " + why, true); });
  std::atomic<bool> writer_finished{false};
  std::thread writer([&] {
    while (auto request = scheduler_.acquire(id_)) {
      if (!call->write(*request)) break;
    }
    writer_finished = true;
    call->writes_done();
  });
  std::string bad_batch;
  for (;;) {
    try {
      std::optional<data::Batch> batch = call->read();
      if (!batch) break;
      if (const std::string problem = data::batch_problem(*batch, expected_); !problem.empty()) {
        throw PeerError("sent a malformed batch: " + problem + "; dropping this worker");
      }
      scheduler_.complete(id_, std::move(*batch));
    } catch (const Error& e) {  // a malformed batch, or a request it refused
      bad_batch = with_context("data worker " + target(), e);
      bad_data_ = dynamic_cast<const DataError*>(&e) != nullptr;
      call->cancel();
    }
  }
  const bool writer_was_done = writer_finished;
  // The writer may be parked in acquire(); retiring the source wakes it.
  scheduler_.retire(id_);
  writer.join();
  const transport::CallStatus status = call->finish();
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    call_.reset();
    stopping = stopping_;
  }
  if (stopping) return Outcome::kDone;
  if (!bad_batch.empty()) {
    why = bad_batch;
    return Outcome::kFinal;
  }
  if (status.ok()) {
    if (writer_was_done) return Outcome::kDone;
    why = "data worker " + target() + " ended its stream early";
    return Outcome::kTransient;
  }
  why = "data worker " + target() + ": " + status.message;
  return status.kind == transport::CallStatus::Kind::kTransient ? Outcome::kTransient : Outcome::kFinal;
}

}  // namespace tandem::feed
