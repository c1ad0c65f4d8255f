// The transform reference fixture (tests/fixtures/transform_reference.json, written by
// bench/make_transform_reference.py with Debian's torchvision): its images and cases, and
// how closely tandem's output must match.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/data/codecs/image.h"

namespace tandem::data {

inline std::vector<uint8_t> base64_decode(const std::string& s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = value(c);
    if (v < 0) continue;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  return out;
}

inline Image from_chw(const std::vector<uint8_t>& chw, int c, int h, int w) {
  Image img;
  img.reshape(h, w, c);
  for (int ch = 0; ch < c; ++ch)
    for (int i = 0; i < h * w; ++i) img.pixels[i * c + ch] = chw[ch * h * w + i];
  return img;
}

inline std::vector<uint8_t> to_chw(const Image& img) {
  std::vector<uint8_t> out(img.bytes());
  write_chw(img, out.data());
  return out;
}

inline const nlohmann::json& reference() {
  static const nlohmann::json ref = [] {
    std::ifstream in(std::string(TANDEM_FIXTURES) + "/transform_reference.json");
    return nlohmann::json::parse(in);
  }();
  return ref;
}

inline Image input(const std::string& name) {
  const auto& in = reference()["inputs"][name];
  const auto shape = in["shape"].get<std::vector<int>>();
  return from_chw(base64_decode(in["data"].get<std::string>()), shape[0], shape[1], shape[2]);
}

struct Tolerance {
  int levels;          // largest allowed |difference|
  double off_fraction; // share of values allowed to differ at all
};

// How far `mine` (CHW) is from case `c`'s output: the largest difference and the share of
// values that differ.
struct Difference {
  int worst = 0;
  double off_fraction = 0;
};
inline Difference difference(const std::vector<uint8_t>& mine, const nlohmann::json& c) {
  const std::vector<uint8_t> expected = base64_decode(c["output"].get<std::string>());
  Difference d;
  size_t off = 0;
  for (size_t i = 0; i < mine.size() && i < expected.size(); ++i) {
    const int diff = std::abs(int(mine[i]) - int(expected[i]));
    d.worst = std::max(d.worst, diff);
    off += diff != 0;
  }
  if (mine.size() != expected.size()) d.worst = 256;
  d.off_fraction = mine.empty() ? 0 : double(off) / mine.size();
  return d;
}

}  // namespace tandem::data
