// An append-only file of whole records (metrics.jsonl's lines, TensorBoard's events) that
// outlives a transient write error: a disk full for a few seconds, a quota hit and
// lifted. A stream's failbit would stick and end the file for the rest of the run,
// silently; here a record that cannot be written whole is cut off the file again (it
// never holds half a record), held, and written before the next one, in order. The first
// failure and the recovery are each logged once, with how many records were held, and
// how many dropped when more than kHeldBytes waited.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <string>

namespace tandem::report {

inline constexpr size_t kHeldBytes = 8 << 20;

class RecordFile {
 public:
  // Opens `path` for appending (`append`: after what it holds; else emptied). Throws
  // std::runtime_error naming it and why when it cannot.
  RecordFile(std::string path, bool append);
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  // Writes `record` after those held, each whole or not at all. Never throws.
  void write(std::string record);

  size_t held() const { return held_.size(); }
  const std::string& path() const { return path_; }

 private:
  bool write_whole(const std::string& record);

  std::string path_;
  int fd_ = -1;
  off_t end_ = 0;  // the file's size after the last whole record
  std::deque<std::string> held_;
  size_t held_bytes_ = 0;
  uint64_t dropped_ = 0;
  bool failing_ = false;
  std::string why_;  // the first failure's reason
};

}  // namespace tandem::report
