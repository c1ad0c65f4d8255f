#include "child_output.h"

#include <unistd.h>

#include <cerrno>

namespace tandem::launch {
namespace {

// A line longer than this is cut and emitted anyway, so a child printing without
// newlines (a progress bar, binary junk) cannot grow our memory without bound.
constexpr size_t kMaxLine = 1 << 20;
// A line kept in the tail is cut to this many bytes.
constexpr size_t kMaxTailLine = 1000;

}  // namespace

bool ChildOutput::pump(int max_reads) {
  char buf[65536];
  for (int i = 0; i < max_reads; ++i) {
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n > 0) {
      partial_.append(buf, static_cast<size_t>(n));
      emit_lines(false);
    } else if (n == 0) {
      return false;
    } else {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
  }
  return true;
}

void ChildOutput::drain_and_close() {
  if (fd_ >= 0) pump(64);
  close();
  emit_lines(true);
}

void ChildOutput::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void ChildOutput::emit_lines(bool flush_partial) {
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    emit_line(std::string_view(partial_).substr(start, nl - start));
  }
  partial_.erase(0, start);
  if (!partial_.empty() && (flush_partial || partial_.size() >= kMaxLine)) {
    emit_line(partial_);
    partial_.clear();
  }
}

void ChildOutput::emit_line(std::string_view line) {
  *out_ << '[' << name_ << "] ";
  out_->write(line.data(), static_cast<std::streamsize>(line.size()));
  *out_ << '\n' << std::flush;
  if (tail_lines_ <= 0) return;
  tail_.emplace_back(line.substr(0, kMaxTailLine));
  if (tail_.size() > static_cast<size_t>(tail_lines_)) tail_.erase(tail_.begin());
}

}  // namespace tandem::launch
