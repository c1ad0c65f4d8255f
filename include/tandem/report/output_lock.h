// One live run per output root: two jobs of one name (a Slurm script's default name, a
// rerun while the first still trains) would resume each other's checkpoints and write
// the same files. The run's rank 0 holds <root>/.tandem-lock, a JSON file naming its
// host, pid, job and start, from before it resumes until it ends, and touches it every
// few seconds. A second run is refused by name. A lock left by a holder that is gone is
// taken over, and said so: on the same host, a pid that no longer runs; on another host
// (the storage is shared), a lock not touched for kLockStaleS.
#pragma once

#include <atomic>
#include <string>
#include <thread>

namespace tandem::report {

inline constexpr double kLockStaleS = 20;  // a lock untouched this long: its holder is gone
inline constexpr double kLockTouchS = 5;

struct LockHolder {
  std::string host;
  int pid = 0;
  std::string job;      // --job-name, TRAINING_JOB_NAME or SLURM_JOB_ID; may be ""
  double started = 0;   // seconds since the epoch
};

class OutputLock {
 public:
  // Takes <root>/.tandem-lock for `me` (its pid is this process's). A lock of a live
  // holder on another host is waited for until it goes stale (kLockStaleS: a requeued
  // job on other nodes, its last run's holder just gone), at most `wait_s`. Throws
  // ConfigError naming the holder and the fixes when it is held; nothing happens when
  // `root` is "" (nowhere to write).
  OutputLock(const std::string& root, const LockHolder& me, double wait_s = kLockStaleS + kLockTouchS);
  ~OutputLock();  // removes the lock, when it is still this process's
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string mine_;  // the lock's text as written
  std::atomic<bool> done_{false};
  std::thread toucher_;
};

// The lock's text for `h`, and back; `why_stale` says why a holder is gone ("" when it
// may be alive): `now` seconds since the epoch, `age_s` since the lock was last touched,
// `this_host` where the caller runs, `alive(pid)` whether a pid runs here.
std::string lock_text(const LockHolder& h);
LockHolder parse_lock(const std::string& text);
std::string why_stale(const LockHolder& h, double age_s, const std::string& this_host, bool pid_alive);

// Whether <root>/.tandem-lock is held, live, by another run than the rank group of
// process `group_pid` on `host` (its rank 0, a child of it, holds the group's lock): a
// rank refused because of it must not write that run's output/failure.
bool held_by_another_run(const std::string& root, const std::string& host, int group_pid);

}  // namespace tandem::report
