// Internal to supervision (process.cc): one child's stdout and stderr, read from its pipe
// without blocking, cut into lines, each written as "[name] line", the last few kept for
// output/failure.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::launch {

class ChildOutput {
 public:
  // Lines go to `out` as "[name] line"; the last `tail_lines` are kept (0 = none).
  ChildOutput(std::string name, std::ostream& out, int tail_lines)
      : name_(std::move(name)), out_(&out), tail_lines_(tail_lines) {}

  void attach(int fd) { fd_ = fd; }  // the pipe's non-blocking read end, owned from here on
  int fd() const { return fd_; }     // -1 once closed

  // Reads at most `max_reads` times; false at end of file (or a read error).
  bool pump(int max_reads);
  // What is left to read (a bounded amount: a grandchild may still hold the pipe and keep
  // writing), then the pipe closed and the last partial line written.
  void drain_and_close();
  void close();
  const std::vector<std::string>& tail() const { return tail_; }

 private:
  void emit_lines(bool flush_partial);
  void emit_line(std::string_view line);

  std::string name_;
  std::ostream* out_;
  int tail_lines_ = 0;
  int fd_ = -1;
  std::string partial_;             // output after the last newline
  std::vector<std::string> tail_;   // the last lines, oldest first
};

}  // namespace tandem::launch
