// Helpers for tests that run the real `tandem` binary (TANDEM_BINARY) as processes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace tandem::testing {

namespace fs = std::filesystem;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A port as /proc/net/tcp writes it: four upper-case hex digits.
inline std::string hex_port(int port) {
  char text[8];
  std::snprintf(text, sizeof text, "%04X", port);
  return text;
}

// Whether a TCP socket listens on address `ip_hex` (as /proc/net/tcp writes it: 127.0.0.1
// is 0100007F; or /proc/net/tcp6, given as `table`) and `port`.
inline bool listens_on(const std::string& ip_hex, int port, const std::string& table = "/proc/net/tcp") {
  const std::string local = ip_hex + ":" + hex_port(port);
  std::istringstream rows(slurp(table));
  for (std::string line; std::getline(rows, line);) {
    std::istringstream fields(line);
    std::string slot, address, remote, state;
    fields >> slot >> address >> remote >> state;
    if (address == local && state == "0A") return true;  // 0A: LISTEN
  }
  return false;
}


// A port the kernel just handed out; the race until a worker binds it is acceptable here.
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// An empty directory of this test process's own, under the system temp directory.
inline fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tandem-test-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs `tandem ARGS` to completion under a deadline (SIGKILL after it), with stdout and
// stderr in `log`. Returns the exit code, or -1 if it was killed.
inline int run_tandem(const std::string& args, const fs::path& log, int timeout_s) {
  const std::string cmd = "timeout -s KILL " + std::to_string(timeout_s) + " " + TANDEM_BINARY + " " + args + " > " +
                          log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A process a test started. If the test ends early (a failed ASSERT), the destructor
// kills it, so no process outlives its test.
struct Child {
  pid_t pid = -1;
  bool reaped = false;
  Child() = default;
  Child(pid_t p) : pid(p) {}
  Child(Child&& other) noexcept : pid(other.pid), reaped(other.reaped) { other.pid = -1; }
  Child& operator=(Child&& other) noexcept {  // `other` takes ours, and ends it
    std::swap(pid, other.pid);
    std::swap(reaped, other.reaped);
    return *this;
  }
  Child(const Child&) = delete;
  ~Child() {
    if (pid > 0 && !reaped) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// Starts `tandem ARGS` in the background with its output in `log`.
inline pid_t spawn_pid(const std::string& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = std::string("exec ") + TANDEM_BINARY + " " + args + " > " + log.string() + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

inline Child spawn(const std::string& args, const fs::path& log) { return spawn_pid(args, log); }

// The exit code, 128+signal if killed, or -1 (after killing it) past the deadline.
inline int wait_exit(Child& child, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  child.reaped = true;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(child.pid, SIGKILL);
  waitpid(child.pid, &status, 0);
  return -1;
}

// Waits until `text` appears in the file at `log` at or after byte `from` (to wait for a
// new line); false after the deadline.
inline bool wait_for_text(const fs::path& log, const std::string& text, std::chrono::seconds timeout, size_t from = 0) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string now = slurp(log);
    if (now.size() > from && now.find(text, from) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// What `tandem ARGS` said and how it exited.
struct Outcome {
  int code = -1;
  std::string out;  // stdout and stderr together
};

inline Outcome run_capture(const std::string& args, const fs::path& log, int timeout_s = 30) {
  const int code = run_tandem(args, log, timeout_s);
  return {code, slurp(log)};
}

// A `tandem worker` on a port the system chose (--port 0), read from its log: no guessing
// of free ports, no race with other tests for them.
struct Worker {
  Child child;
  int port = 0;
  std::string target() const { return "127.0.0.1:" + std::to_string(port); }
};

inline Worker start_worker(const std::string& args, const fs::path& log,
                           std::chrono::seconds timeout = std::chrono::seconds(30)) {
  Worker w{spawn("worker --port 0 --bind 127.0.0.1 " + args, log), 0};
  const std::string marker = " on port ";
  if (!wait_for_text(log, marker, timeout)) return w;  // port 0: the caller's ASSERT shows the log
  const std::string text = slurp(log);
  w.port = std::atoi(text.c_str() + text.find(marker) + marker.size());
  return w;
}

}  // namespace tandem::testing
