// One read as steps (ReadSteps), the blocking read of a plan, and the I/O threads' engine
// (read_engines.h). io_uring's engine: uring_engine.cc.
#include "read_engines.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "tandem/common/cpu_time.h"

namespace tandem::data {

// --- one read, step by step --------------------------------------------------------------

namespace {

// Errors that are this host's, not the file's: out of open files or memory.
bool host_ran_out(int err) { return err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS; }

std::string too_large(uint64_t size, uint64_t most) {
  return "is " + std::to_string(size) + " bytes, more than the " + std::to_string(most >> 20) +
         " MiB one sample's read may take (the read-ahead's share of --max-inflight-mb, at most 1 GiB)";
}

}  // namespace

ReadSteps::ReadSteps(ReadPlan plan) : plan_(std::move(plan)) {
  if (!plan_.problem.empty()) fail(plan_.problem);
}

void ReadSteps::fail(std::string problem, bool host_fault) {
  out_.problem = std::move(problem);
  out_.host_fault = host_fault;
  out_.bytes.clear();
  out_.header.clear();
  step_ = Step::kDone;
}

void ReadSteps::opened(int result) {
  if (result < 0) {
    return fail(std::string(plan_.member ? "cannot open the shard: " : "cannot open: ") + std::strerror(-result),
                host_ran_out(-result));
  }
  fd_ = result;
  if (!plan_.whole && plan_.bytes > plan_.most_bytes) return fail(too_large(plan_.bytes, plan_.most_bytes));
  if (plan_.whole) {
    step_ = Step::kSize;
  } else {
    begin_reading(plan_.bytes);
  }
}

void ReadSteps::sized(int result, uint64_t size, bool regular) {
  if (result < 0) return fail(std::string("cannot stat: ") + std::strerror(-result), host_ran_out(-result));
  if (!regular) return fail("not a regular file (a FIFO, a device or a socket): list only image files");
  if (size > plan_.most_bytes) return fail(too_large(size, plan_.most_bytes));
  if (plan_.bytes != 0 && size != plan_.bytes) {
    return fail("changed since it was indexed (" + std::to_string(plan_.bytes) + " bytes then, " + std::to_string(size) +
                " now)");
  }
  begin_reading(size);
}

void ReadSteps::begin_reading(uint64_t size) {
  out_.header.resize(plan_.header);
  out_.bytes.resize(static_cast<size_t>(size));
  parts_[0] = iovec{out_.header.data(), out_.header.size()};
  parts_[1] = iovec{out_.bytes.data(), out_.bytes.size()};
  first_ = 0;
  at_ = plan_.whole ? 0 : plan_.offset - plan_.header;
  left_ = plan_.header + size;
  step_ = left_ == 0 ? Step::kDone : Step::kRead;
}

std::pair<const iovec*, int> ReadSteps::read_into() const {
  int first = first_;
  while (first < 1 && parts_[first].iov_len == 0) ++first;
  return {parts_ + first, 2 - first};
}

void ReadSteps::read(long result) {
  if (result == -EINTR || result == -EAGAIN) return;  // the same read again
  if (result < 0) {
    return fail(std::string("read failed: ") + std::strerror(static_cast<int>(-result)),
                host_ran_out(static_cast<int>(-result)));
  }
  if (result == 0) {
    return fail(plan_.whole ? "shorter than its size"
                            : "ends " + std::to_string(left_) + " bytes early (the file is shorter than when it was listed)");
  }
  at_ += static_cast<uint64_t>(result);
  left_ -= static_cast<uint64_t>(result);
  for (size_t got = static_cast<size_t>(result); got > 0 && first_ < 2;) {  // past what came
    iovec& part = parts_[first_];
    const size_t take = std::min(got, part.iov_len);
    part.iov_base = static_cast<char*>(part.iov_base) + take;
    part.iov_len -= take;
    got -= take;
    if (part.iov_len == 0) ++first_;
  }
  if (left_ == 0) step_ = Step::kDone;
}

Fetched read_blocking(const ReadPlan& plan) {
  ReadSteps steps(plan);
  if (!steps.done()) {
    const int fd = ::open(plan.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO does not block it
    steps.opened(fd < 0 ? -errno : fd);
  }
  if (steps.step() == ReadSteps::Step::kSize) {
    struct stat st{};
    const int r = ::fstat(steps.fd(), &st);
    steps.sized(r < 0 ? -errno : 0, static_cast<uint64_t>(st.st_size), S_ISREG(st.st_mode));
  }
  while (steps.step() == ReadSteps::Step::kRead) {
    const auto [parts, n] = steps.read_into();
    const ssize_t got = ::preadv(steps.fd(), parts, n, static_cast<off_t>(steps.read_at()));
    steps.read(got < 0 ? -errno : got);
  }
  if (steps.fd() >= 0) ::close(steps.fd());
  return steps.take();
}

// --- I/O threads -------------------------------------------------------------------------

namespace {

// Threads started as reads wait and none is free, up to a limit; each blocks in one read
// at a time. Room given back wakes one waiting thread, which hands it on while room is
// left: waking them all at every sample taken (a thousand threads waiting under the byte
// limit) kept a worker's cores busy switching between threads that went straight back to
// sleep (on 12 cores: 1,100 images/s instead of 6,000).
class ThreadEngine final : public ReadEngine {
 public:
  ThreadEngine(ReadAhead::Core& core, int max_threads, std::function<Fetched(const ReadJob&)> read)
      : core_(core), max_threads_(std::max(1, max_threads)), read_(std::move(read)) {}
  ~ThreadEngine() override { stop(); }

  // A thread for each read that may start and finds none free, up to the limit.
  void wake() override {
    {
      std::lock_guard lock(core_.mu);
      const size_t waiting = core_.queue.size(), free = static_cast<size_t>(idle_);
      size_t spawn = waiting > free ? std::min(waiting - free, static_cast<size_t>(max_threads_) - threads_.size()) : 0;
      for (; spawn > 0 && !core_.stopping; --spawn) threads_.emplace_back([this] { run(); });
    }
    room_.notify_one();
  }

  void stop() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(core_.mu);
      core_.stopping = true;
      threads.swap(threads_);
    }
    room_.notify_all();
    for (auto& t : threads) t.join();
  }

  IoEngine kind() const override { return IoEngine::kThreads; }
  int threads() const override {
    std::lock_guard lock(core_.mu);
    return static_cast<int>(threads_.size());
  }

 private:
  void run() {
    for (;;) {
      std::unique_lock lock(core_.mu);
      ++idle_;
      while (!core_.stopping && !core_.can_start()) {
        room_.wait(lock);
        if (!core_.stopping && !core_.can_start()) ++core_.idle_wakeups;
      }
      --idle_;
      std::optional<ReadJob> job = core_.stopping ? std::nullopt : core_.next_job();
      const bool more = core_.can_start();
      lock.unlock();
      if (more) room_.notify_one();  // hand the room on
      if (!job) {
        if (core_.stopping) return;
        continue;
      }
      Fetched fetched;
      const double cpu_start = thread_cpu_seconds();
      try {
        fetched = read_(*job);
      } catch (const std::exception& e) {  // a read must not throw: the sample's maker reports it
        fetched.problem = e.what();
      }
      fetched.cpu_seconds = thread_cpu_seconds() - cpu_start;
      core_.finish(*job, std::move(fetched));
    }
  }

  ReadAhead::Core& core_;
  const int max_threads_;
  const std::function<Fetched(const ReadJob&)> read_;
  std::condition_variable room_;      // a read may start, or the engine stops
  int idle_ = 0;                      // GUARDED_BY(core_.mu): threads waiting on room_
  std::vector<std::thread> threads_;  // GUARDED_BY(core_.mu)
};

}  // namespace

std::unique_ptr<ReadEngine> make_thread_engine(ReadAhead::Core& core, int max_threads,
                                               std::function<Fetched(const ReadJob&)> read) {
  return std::make_unique<ThreadEngine>(core, max_threads, std::move(read));
}

}  // namespace tandem::data
