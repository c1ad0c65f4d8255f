#include "feed_images.h"

#include <array>
#include <cstdint>
#include <vector>

#include "tandem/common/error.h"
#include "tandem/common/simd.h"
#include "tandem/common/text.h"
#include "tandem/data/sources/source_kinds.h"

namespace tandem::python {
namespace {

// Each channel's 256 results, each computed as torchvision computes one value.
std::vector<std::array<float, 256>> tables(const data::DatasetInfo& info, int channels) {
  std::vector<std::array<float, 256>> out(static_cast<size_t>(channels));
  for (int c = 0; c < channels; ++c) {
    const bool given = info.mean.size() == static_cast<size_t>(channels) && info.std.size() == info.mean.size();
    const float mean = given ? info.mean[static_cast<size_t>(c)] : 0.0f;
    const float std = given ? info.std[static_cast<size_t>(c)] : 1.0f;
    for (int x = 0; x < 256; ++x) out[static_cast<size_t>(c)][x] = (static_cast<float>(x) / 255.0f - mean) / std;
  }
  return out;
}

TANDEM_VECTOR_CLONES void map_plane(const uint8_t* in, size_t n, const float* table, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = table[in[i]];
}

}  // namespace

bool float_images(const nlohmann::json& request, const data::DatasetInfo& info) {
  const std::string mode = request.value("images", std::string("auto"));
  if (mode == "uint8") return false;
  if (mode == "float32") return true;
  if (mode != "auto") {
    throw ConfigError("images=" + printable(mode, 40) + ": give \"auto\" (as the dataset's own transform ends its "
                      "images), \"uint8\" (as they travel) or \"float32\" (normalised with the dataset's mean and std)");
  }
  return data::description_setting(info.description, "output") == "float32";
}

void land_as_float(data::Batch& batch, const data::DatasetInfo& info) {
  if (batch.dtype != data::DType::kUInt8 || batch.shape.size() != 4) return;
  const size_t n = static_cast<size_t>(batch.shape[0]), channels = static_cast<size_t>(batch.shape[1]);
  const size_t plane = static_cast<size_t>(batch.shape[2]) * static_cast<size_t>(batch.shape[3]);
  const auto table = tables(info, static_cast<int>(channels));
  data::Buffer floats(n * channels * plane * sizeof(float));
  const auto* in = reinterpret_cast<const uint8_t*>(batch.data.data());
  auto* out = reinterpret_cast<float*>(floats.data());
  for (size_t s = 0; s < n; ++s) {
    for (size_t c = 0; c < channels; ++c) {
      const size_t at = (s * channels + c) * plane;
      map_plane(in + at, plane, table[c].data(), out + at);
    }
  }
  batch.data = std::move(floats);
  batch.dtype = data::DType::kFloat32;
}

}  // namespace tandem::python
