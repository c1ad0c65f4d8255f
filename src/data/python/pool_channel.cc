// Talking to one Python process of the pool, and the messages (pool_channel.h).
#include "pool_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tandem/common/text.h"

namespace tandem::data::pool {
namespace {

constexpr uint32_t kMaxMessageBytes = 64u << 20;  // a traceback or a field list, never array data
constexpr int kLookEveryMs = 100;                 // without a pidfd: how often the process is looked at

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Whether `pid` has ended (not reaping it: its group keeps its id until the pool reaps it).
bool ended(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// Waits until the socket is ready for `events`; false at `deadline`. Throws ProcessGone
// when the process ends first (its last words, already in the socket, are still read).
bool wait_ready(const Channel& c, short events, Clock::time_point deadline) {
  for (;;) {
    const double left = seconds_between(Clock::now(), deadline);
    if (left <= 0) return false;
    pollfd p[2] = {{c.sock, events, 0}, {c.pidfd, POLLIN, 0}};
    const int wait_ms = static_cast<int>(std::min(left * 1000 + 1, c.pidfd < 0 ? double(kLookEveryMs) : 1e9));
    const int n = ::poll(p, c.pidfd < 0 ? 1 : 2, wait_ms);
    if (n < 0 && errno != EINTR) throw ProcessGone{errno_text("poll")};
    if (n > 0 && p[0].revents != 0) return true;
    if ((n > 0 && p[1].revents != 0) || (c.pidfd < 0 && ended(c.pid))) throw ProcessGone{"it ended"};
  }
}

void send_all(const Channel& c, const std::string& data, Clock::time_point deadline) {
  for (size_t done = 0; done < data.size();) {
    if (!wait_ready(c, POLLOUT, deadline)) throw ProcessSlow{};
    const ssize_t n = ::send(c.sock, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw ProcessGone{errno_text("send")};
    done += static_cast<size_t>(n);
  }
}

void receive_all(const Channel& c, char* out, size_t size, Clock::time_point deadline) {
  for (size_t done = 0; done < size;) {
    if (!wait_ready(c, POLLIN, deadline)) throw ProcessSlow{};
    const ssize_t n = ::recv(c.sock, out + done, size - done, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) throw ProcessGone{"its socket closed"};
    if (n < 0) throw ProcessGone{errno_text("recv")};
    done += static_cast<size_t>(n);
  }
}

}  // namespace

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // not glibc's wrapper: the wheel's glibc floor is 2.34
#else
  (void)pid;
  return -1;
#endif
}

void send_message(const Channel& c, const nlohmann::json& message, Clock::time_point deadline) {
  const std::string body = message.dump();
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string framed(reinterpret_cast<const char*>(&n), 4);  // little-endian: x86-64 and arm64
  send_all(c, framed + body, deadline);
}

bool wait_message(const Channel& c, Clock::time_point deadline) { return wait_ready(c, POLLIN, deadline); }

nlohmann::json receive_message(const Channel& c, Clock::time_point deadline) {
  uint32_t n = 0;
  receive_all(c, reinterpret_cast<char*>(&n), 4, deadline);
  if (n > kMaxMessageBytes) throw ProcessGone{"it sent a message of " + std::to_string(n) + " bytes"};
  std::string body(n, '\0');
  receive_all(c, body.data(), n, deadline);
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) throw ProcessGone{"it sent something that is not a JSON object"};
  return j;
}

nlohmann::json init_request(const PythonPoolOptions& opts, size_t max_shm, bool first) {
  nlohmann::json init = {{"op", "init"}, {"file", opts.file}, {"name", opts.name},
                         {"args", nlohmann::json::parse(opts.args_json)},
                         {"kind", opts.kind == PythonPoolOptions::Kind::kFunction ? "function" : "dataset"},
                         {"max_shm", max_shm}, {"native", first && opts.describe_native}};
  if (!opts.transforms_json.empty()) init["transforms"] = nlohmann::json::parse(opts.transforms_json);
  return init;
}

nlohmann::json get_request(uint64_t index, uint64_t seed) { return {{"op", "get"}, {"index", index}, {"seed", seed}}; }

nlohmann::json many_request(const std::vector<std::pair<uint64_t, uint64_t>>& items, bool batched) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [index, seed] : items) list.push_back({index, seed});
  return {{"op", "many"}, {"items", std::move(list)}, {"batched", batched}};
}

nlohmann::json call_request(uint64_t index, uint64_t seed, const std::vector<int64_t>& shape, size_t nbytes) {
  return {{"op", "call"}, {"index", index}, {"seed", seed}, {"shape", shape}, {"nbytes", nbytes}};
}

PythonDatasetAbout about_of(const nlohmann::json& reply) {
  PythonDatasetAbout about;
  about.len = reply.at("len").get<uint64_t>();
  if (reply.contains("num_classes") && reply["num_classes"].is_number_integer()) {
    about.num_classes = reply["num_classes"].get<int64_t>();
  }
  if (reply.contains("classes") && reply["classes"].is_array()) {
    about.classes = reply["classes"].get<std::vector<std::string>>();
  }
  if (reply.contains("ragged_fields") && reply["ragged_fields"].is_array()) {
    about.ragged_fields = reply["ragged_fields"].get<std::vector<std::string>>();
  }
  if (reply.contains("native") && reply["native"].is_object()) about.native_json = reply["native"].dump();
  if (reply.contains("native_reason") && reply["native_reason"].is_string()) {
    about.native_reason = printable(reply["native_reason"].get<std::string>(), 400);
  }
  return about;
}

std::string python_error(const nlohmann::json& reply) {
  std::string out = reply.value("error", std::string("an error without a message"));
  const std::string where = reply.value("where", std::string());
  const std::string trace = reply.value("traceback", std::string());
  if (!where.empty()) out += " (at " + where + ")";
  if (!trace.empty()) out += "\n" + trace;
  return out;
}

SampleFields fields_of(const nlohmann::json& reply, const std::byte* shm, size_t mapped) {
  SampleFields out;
  for (const auto& [name, f] : reply.at("fields").items()) {
    SampleField field;
    field.dtype = f.value("dtype", std::string("?"));
    if (f.contains("shape") && f["shape"].is_array()) field.shape = f["shape"].get<std::vector<int64_t>>();
    if (f.contains("nbytes")) {
      const size_t offset = f.at("offset").get<size_t>(), bytes = f.at("nbytes").get<size_t>();
      if (offset > mapped || bytes > mapped - offset) throw ProcessGone{"it placed field '" + name + "' outside its shared memory"};
      field.is_array = true;
      field.bytes = {shm + offset, bytes};
    } else if (f.contains("value")) {
      const nlohmann::json& v = f["value"];
      field.integer = v.is_number_integer() || v.is_boolean() ? v.get<int64_t>() : 0;
      field.real = v.is_number() ? v.get<double>() : static_cast<double>(field.integer);
    }
    out.emplace_back(name, std::move(field));
  }
  return out;
}

}  // namespace tandem::data::pool
