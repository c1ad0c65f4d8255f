#include "signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tandem::launch {
namespace {

std::atomic<int> g_signal_write_fd{-1};
std::atomic<bool> g_supervising{false};

void on_signal(int sig) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  const int fd = g_signal_write_fd.load();
  if (fd >= 0) {
    // A full pipe drops the byte; there are plenty pending already, so nothing is lost.
    ssize_t ignored = write(fd, &byte, 1);
    (void)ignored;
  }
  errno = saved_errno;
}

}  // namespace

SignalCatcher::SignalCatcher() {
  if (g_supervising.exchange(true)) throw std::runtime_error("supervise() is already running in this process");
  if (pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    g_supervising = false;
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  g_signal_write_fd = fds_[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  // Other threads' blocking calls should not see EINTR; our poll() wakes on the pipe.
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

SignalCatcher::~SignalCatcher() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  g_signal_write_fd = -1;
  close(fds_[0]);
  close(fds_[1]);
  g_supervising = false;
}

std::vector<int> SignalCatcher::take() {
  std::vector<int> sigs;
  unsigned char buf[64];
  ssize_t n;
  while ((n = read(fds_[0], buf, sizeof buf)) > 0) sigs.insert(sigs.end(), buf, buf + n);
  return sigs;
}

}  // namespace tandem::launch
