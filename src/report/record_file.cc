#include "tandem/report/record_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace tandem::report {

RecordFile::RecordFile(std::string path, bool append) : path_(std::move(path)) {
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644);
  if (fd_ < 0) {
    throw std::runtime_error("cannot write " + path_ + " (" + std::strerror(errno) +
                             "): check the directory exists and is writable");
  }
  end_ = lseek(fd_, 0, SEEK_END);
  if (end_ < 0) end_ = 0;
}

RecordFile::~RecordFile() {
  if (!held_.empty()) {
    spdlog::warn("{}: {} records could not be written before the run ended ({})", path_, held_.size(), why_);
  }
  if (fd_ >= 0) close(fd_);
}

// All of `record` at the end of the last whole one; on any failure the file is cut back
// there, so a reader never meets half a record.
bool RecordFile::write_whole(const std::string& record) {
  for (size_t done = 0; done < record.size();) {
    const ssize_t n = pwrite(fd_, record.data() + done, record.size() - done, end_ + static_cast<off_t>(done));
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (why_.empty() || !failing_) why_ = n < 0 ? std::strerror(errno) : "nothing written";
    [[maybe_unused]] const int cut = ftruncate(fd_, end_);
    return false;
  }
  end_ += static_cast<off_t>(record.size());
  return true;
}

void RecordFile::write(std::string record) {
  held_bytes_ += record.size();
  held_.push_back(std::move(record));
  while (held_bytes_ > kHeldBytes && held_.size() > 1) {
    held_bytes_ -= held_.front().size();
    held_.pop_front();
    ++dropped_;
  }
  const size_t waiting = held_.size();
  while (!held_.empty() && write_whole(held_.front())) {
    held_bytes_ -= held_.front().size();
    held_.pop_front();
  }
  if (!held_.empty() && !failing_) {
    failing_ = true;
    spdlog::warn("cannot write {} ({}): holding its records in memory and trying again with each new one", path_, why_);
  } else if (held_.empty() && failing_) {
    failing_ = false;
    spdlog::info("{} is written again: the {} records that waited are in it{}", path_, waiting,
                 dropped_ ? fmt::format(", {} older ones were dropped (more than {} MiB waited)", dropped_, kHeldBytes >> 20)
                          : std::string());
    dropped_ = 0;
    why_.clear();
  }
}

}  // namespace tandem::report
