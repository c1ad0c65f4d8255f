// The io_uring engine of a ReadAhead (read_engines.h): one thread keeps thousands of reads
// in flight. Each read is a chain of operations queued to the kernel, the next queued
// when the last ends: the emulated latency (a timeout), the open, the size (statx) of a
// whole file, and the reads; the close is done at once. Blocking reads (a network file
// system, FUSE) run on the kernel's own workers, whose number is raised to the reads in
// flight (IORING_REGISTER_IOWQ_MAX_WORKERS): without that, 4 per core.
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <unordered_set>
#include <vector>

#include <spdlog/spdlog.h>

#include "read_engines.h"
#include "tandem/common/cpu_time.h"

namespace tandem::data {
namespace {

// Cancelled reads are waited for this long when the read-ahead ends; a read the kernel
// still holds after it keeps its memory (leaked, not freed under the kernel's feet).
constexpr double kStopSeconds = 5;
constexpr uint64_t kEventTag = 1;  // user_data of the eventfd's poll (an Op* is never 1)

struct Op {
  ReadJob job;
  ReadSteps steps;
  bool delayed = false;  // the emulated latency is over (or there is none)
  __kernel_timespec delay{};
  struct statx size{};
  Op(ReadJob j, ReadPlan plan) : job(std::move(j)), steps(std::move(plan)) {}
};

class UringEngine final : public ReadEngine {
 public:
  UringEngine(ReadAhead::Core& core, int capacity) : core_(core), capacity_(std::max(1, capacity)) {}
  ~UringEngine() override {
    stop();
    if (ring_ready_ && ops_.empty()) io_uring_queue_exit(&ring_);  // else the kernel may still write into the ops
    if (event_fd_ >= 0) ::close(event_fd_);
  }

  // Sets up the ring; "" or why it cannot be used.
  std::string open() {
    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = static_cast<unsigned>(capacity_ + 16);
    const int r = io_uring_queue_init_params(static_cast<unsigned>(std::min(capacity_, 1024)), &ring_, &params);
    if (r < 0) return std::string("io_uring_setup: ") + std::strerror(-r);
    ring_ready_ = true;
    unsigned workers[2] = {static_cast<unsigned>(capacity_), 0};  // bounded (file reads), unbounded unchanged
    io_uring_register_iowq_max_workers(&ring_, workers);          // kernels before 5.15: 4 per core
    event_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (event_fd_ < 0) return std::string("eventfd: ") + std::strerror(errno);
    arm_event();
    if (const int s = io_uring_submit(&ring_); s < 0) return std::string("io_uring_enter: ") + std::strerror(-s);
    reaper_ = std::thread([this] { run(); });
    return "";
  }

  void wake() override {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(event_fd_, &one, sizeof one);
  }

  void stop() override {
    {
      std::lock_guard lock(core_.mu);
      core_.stopping = true;
    }
    if (reaper_.joinable()) {
      wake();
      reaper_.join();
    }
  }

  IoEngine kind() const override { return IoEngine::kUring; }
  int threads() const override { return 1; }

 private:
  io_uring_sqe* sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    if (s == nullptr) {
      io_uring_submit(&ring_);
      s = io_uring_get_sqe(&ring_);
    }
    return s;  // never null: the ring was just emptied, and each op has one entry at a time
  }

  void arm_event() {
    io_uring_sqe* s = sqe();
    io_uring_prep_poll_add(s, event_fd_, POLLIN);
    io_uring_sqe_set_data64(s, kEventTag);
  }

  void run() {
    while (!stopping()) {
      // The round's CPU (reads of cached files are done inside the submit) is its reads'.
      const double cpu = thread_cpu_seconds();
      start_reads();
      io_uring_submit_and_wait(&ring_, 1);
      reap();
      cpu_ += thread_cpu_seconds() - cpu;
      finish_ended();
    }
    cancel_all();
  }

  bool stopping() {
    std::lock_guard lock(core_.mu);
    return core_.stopping;
  }

  // Every read that may start, up to the ring's capacity.
  void start_reads() {
    std::vector<ReadJob> jobs;
    {
      std::lock_guard lock(core_.mu);
      while (ops_.size() + jobs.size() < static_cast<size_t>(capacity_)) {
        std::optional<ReadJob> job = core_.next_job();
        if (!job) break;
        jobs.push_back(std::move(*job));
      }
    }
    for (ReadJob& job : jobs) {
      const uint64_t key = job.key;
      Op* op = new Op(std::move(job), core_.plan(key));
      ops_.insert(op);
      op->delayed = core_.latency_s <= 0;
      if (!op->delayed) {
        op->delay.tv_sec = static_cast<long long>(core_.latency_s);
        op->delay.tv_nsec = static_cast<long long>((core_.latency_s - static_cast<double>(op->delay.tv_sec)) * 1e9);
      }
      next_step(op);
    }
  }

  // Queues the operation `op` needs next, or ends it.
  void next_step(Op* op) {
    if (op->steps.done()) return end(op);
    io_uring_sqe* s = sqe();
    const ReadPlan& plan = op->steps.plan();
    if (!op->delayed) {
      io_uring_prep_timeout(s, &op->delay, 0, 0);
    } else if (op->steps.step() == ReadSteps::Step::kOpen) {
      io_uring_prep_openat(s, AT_FDCWD, plan.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
    } else if (op->steps.step() == ReadSteps::Step::kSize) {
      io_uring_prep_statx(s, op->steps.fd(), "", AT_EMPTY_PATH, STATX_SIZE | STATX_TYPE, &op->size);
    } else {
      const auto [parts, n] = op->steps.read_into();
      io_uring_prep_readv(s, op->steps.fd(), parts, static_cast<unsigned>(n), op->steps.read_at());
    }
    io_uring_sqe_set_data(s, op);
  }

  void advance(Op* op, int res) {
    if (!op->delayed) {
      op->delayed = true;  // -ETIME: the delay passed
    } else if (op->steps.step() == ReadSteps::Step::kOpen) {
      op->steps.opened(res);
    } else if (op->steps.step() == ReadSteps::Step::kSize) {
      op->steps.sized(res, op->size.stx_size, S_ISREG(op->size.stx_mode));
    } else {
      op->steps.read(res);
    }
    next_step(op);
  }

  void end(Op* op) {
    if (op->steps.fd() >= 0) ::close(op->steps.fd());
    ended_.push_back(op);
  }

  void reap() {
    unsigned head = 0, seen = 0;
    io_uring_cqe* cqe = nullptr;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      if (cqe->user_data == kEventTag) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t n = ::read(event_fd_, &count, sizeof count);
        rearm_event_ = true;
      } else {
        advance(static_cast<Op*>(io_uring_cqe_get_data(cqe)), cqe->res);
      }
    }
    io_uring_cq_advance(&ring_, seen);
    if (rearm_event_) {
      arm_event();
      rearm_event_ = false;
    }
  }

  // The reads that ended this round share the engine's CPU since the last ones.
  void finish_ended() {
    if (ended_.empty()) return;
    const double each = cpu_ / static_cast<double>(ended_.size());
    cpu_ = 0;
    for (Op* op : ended_) {
      Fetched f = op->steps.take();
      if (f.problem.empty() && core_.source.check) core_.source.check(op->job.key, f);
      f.cpu_seconds = each;
      core_.finish(op->job, std::move(f));
      ops_.erase(op);
      delete op;
    }
    ended_.clear();
  }

  // Stopping: cancels what is in flight and waits for it (kStopSeconds at most).
  void cancel_all() {
    for (Op* op : ops_) {
      io_uring_sqe* s = sqe();
      io_uring_prep_cancel(s, op, 0);
      io_uring_sqe_set_data64(s, kEventTag);
    }
    const auto deadline = after(kStopSeconds);
    while (!ops_.empty() && Clock::now() < deadline) {
      __kernel_timespec wait{0, 50'000'000};
      io_uring_cqe* cqe = nullptr;
      io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &wait, nullptr);
      unsigned head = 0, seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;
        if (cqe->user_data == kEventTag) continue;
        Op* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
        const bool opening = op->delayed && op->steps.step() == ReadSteps::Step::kOpen;
        if (opening && cqe->res >= 0) ::close(cqe->res);  // an open that ended before its cancel
        if (op->steps.fd() >= 0) ::close(op->steps.fd());
        ops_.erase(op);
        delete op;
      }
      io_uring_cq_advance(&ring_, seen);
    }
    if (!ops_.empty()) spdlog::warn("{} reads did not end within {} s of stopping: leaving them to the kernel", ops_.size(), kStopSeconds);
  }

  ReadAhead::Core& core_;
  const int capacity_;
  io_uring ring_{};
  bool ring_ready_ = false;
  int event_fd_ = -1;
  bool rearm_event_ = false;
  std::unordered_set<Op*> ops_;  // the reaper's: reads in flight
  std::vector<Op*> ended_;       // the reaper's: reads ended this round
  double cpu_ = 0;               // the reaper's CPU not yet given to a read
  std::thread reaper_;
};

}  // namespace

std::unique_ptr<ReadEngine> make_uring_engine(ReadAhead::Core& core, int entries, std::string& why) {
  auto engine = std::make_unique<UringEngine>(core, entries);
  why = engine->open();
  if (!why.empty()) return nullptr;
  return engine;
}

}  // namespace tandem::data
