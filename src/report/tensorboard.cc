#include "tandem/report/tensorboard.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tandem/common/files.h"
#include "tandem/v1/tensorboard.pb.h"

namespace tandem::report {
namespace {

namespace tb = tandem::v1::tensorboard;

// CRC-32C's table (the reflected Castagnoli polynomial 0x82f63b78). Neither zlib (CRC-32)
// nor bookworm's Abseil (absl/crc came in 2023) has CRC-32C, and TFRecord needs no more.
std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("localhost");
}

}  // namespace

uint32_t masked_crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = crc32c_table();
  uint32_t c = 0xffffffffu;
  for (const char b : bytes) c = table[(c ^ static_cast<uint8_t>(b)) & 0xff] ^ (c >> 8);
  c = ~c;
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TensorBoardLog::TensorBoardLog(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  path_ = fmt::format("{}/events.out.tfevents.{}.{}", dir, static_cast<int64_t>(now_seconds()), host_name());
  try {
    out_ = std::make_unique<RecordFile>(path_, false);
  } catch (const std::runtime_error&) {
    throw std::runtime_error("cannot write " + path_ + ": " + unwritable_reason(dir));
  }
  tb::Event first;
  first.set_wall_time(now_seconds());
  first.set_file_version("brain.Event:2");
  record(first.SerializeAsString());
}

void TensorBoardLog::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  tb::Event e;
  e.set_wall_time(now_seconds());
  e.set_step(step);
  for (const auto& [tag, value] : values) {
    if (!std::isfinite(value)) continue;
    tb::Summary::Value* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  record(e.SerializeAsString());
}

void TensorBoardLog::record(const std::string& bytes) {
  char header[12];
  const uint64_t length = bytes.size();
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  const uint32_t length_crc = masked_crc32c(std::string_view(header, 8));
  for (int i = 0; i < 4; ++i) header[8 + i] = static_cast<char>((length_crc >> (8 * i)) & 0xff);
  const uint32_t data_crc = masked_crc32c(bytes);
  char footer[4];
  for (int i = 0; i < 4; ++i) footer[i] = static_cast<char>((data_crc >> (8 * i)) & 0xff);
  std::string event(header, sizeof header);
  event += bytes;
  event.append(footer, sizeof footer);
  out_->write(std::move(event));
}

std::string tensorboard_dir(const std::string& sagemaker_root, const std::string& summary_dir) {
  // No root (a run outside SageMaker): nothing to read, not /input/config/... of this machine.
  const auto config = sagemaker_root.empty()
                          ? std::nullopt
                          : read_file(sagemaker_root + "/input/config/tensorboardoutputconfig.json");
  if (config) {
    const nlohmann::json j = nlohmann::json::parse(*config, nullptr, /*allow_exceptions=*/false);
    const auto it = j.is_object() ? j.find("LocalPath") : j.end();
    return it != j.end() && it->is_string() && !it->get<std::string>().empty() ? it->get<std::string>()
                                                                                : sagemaker_root + "/output/tensorboard";
  }
  return summary_dir + "/tensorboard";
}

}  // namespace tandem::report
