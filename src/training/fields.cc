#include "fields.h"

#include <torch/torch.h>

namespace tandem::training {
namespace {

// A CPU tensor over `data` (no copy); an empty one when there is nothing to view.
torch::Tensor view(void* data, std::vector<int64_t> shape, torch::ScalarType dtype) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  if (n == 0 || data == nullptr) return torch::empty(shape, torch::TensorOptions(dtype));
  return torch::from_blob(data, shape, torch::TensorOptions(dtype));
}

// A ragged field as tandem.Feed names it: NAME, NAME_lengths and NAME_offsets.
void add_ragged(NamedTensors& out, const std::string& name, torch::Tensor values, torch::Tensor lengths) {
  torch::Tensor offsets = torch::zeros({lengths.size(0) + 1}, torch::kInt64);
  offsets.slice(0, 1).copy_(lengths.cumsum(0));
  out.emplace_back(name, std::move(values));
  out.emplace_back(name + "_lengths", std::move(lengths));
  out.emplace_back(name + "_offsets", std::move(offsets));
}

// The dtype as tandem's schemas write it ("uint8", "float32"), else as LibTorch does.
std::string dtype_text(torch::ScalarType t) {
  for (const data::DType d : {data::DType::kFloat32, data::DType::kBFloat16, data::DType::kFloat16,
                              data::DType::kUInt8, data::DType::kInt32, data::DType::kInt64}) {
    if (scalar_type(d) == t) return data::dtype_name(d);
  }
  return c10::toString(t);
}

}  // namespace

torch::ScalarType scalar_type(data::DType dtype) {
  switch (dtype) {
    case data::DType::kFloat32: return torch::kFloat32;
    case data::DType::kBFloat16: return torch::kBFloat16;
    case data::DType::kFloat16: return torch::kFloat16;
    case data::DType::kUInt8: return torch::kUInt8;
    case data::DType::kInt32: return torch::kInt32;
    case data::DType::kInt64: return torch::kInt64;
  }
  return torch::kFloat32;
}

NamedTensors host_fields(data::Batch& batch, const data::DatasetInfo& info) {
  const int64_t n = batch.size();
  NamedTensors out;
  size_t extra = 0;
  for (const data::FieldSpec& spec : info.schema()) {
    if (spec.name == data::kImageField) {
      out.emplace_back(spec.name, view(batch.data.data(), batch.shape, scalar_type(batch.dtype)));
    } else if (spec.name == data::kLabelField) {
      out.emplace_back(spec.name, view(batch.labels.data(), {n}, torch::kInt64));
    } else {
      data::Field& f = batch.fields.at(extra++);
      torch::Tensor values = view(f.data.data(), f.shape, scalar_type(f.dtype));
      if (!spec.ragged()) out.emplace_back(spec.name, std::move(values));
      else add_ragged(out, spec.name, std::move(values), view(f.lengths.data(), {n}, torch::kInt64));
    }
  }
  return out;
}

NamedTensors schema_batch(const data::DatasetInfo& info) {
  constexpr int64_t kSamples = 2;
  NamedTensors out;
  for (const data::FieldSpec& spec : info.schema()) {
    std::vector<int64_t> shape = spec.shape;
    const torch::ScalarType dtype = scalar_type(spec.dtype);
    if (!spec.ragged()) {
      shape.insert(shape.begin(), kSamples);
      out.emplace_back(spec.name, torch::zeros(shape, torch::TensorOptions(dtype)));
      continue;
    }
    shape[0] = 1 + 2;  // one row, then two
    add_ragged(out, spec.name, torch::zeros(shape, torch::TensorOptions(dtype)), torch::tensor({int64_t{1}, int64_t{2}}));
  }
  return out;
}

std::string tensor_text(const torch::Tensor& t) {
  std::string out = dtype_text(t.scalar_type()) + " [";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? ", " : "") + std::to_string(t.size(i));
  return out + "]";
}

std::string batch_text(const NamedTensors& batch) {
  std::string out;
  for (const auto& [name, t] : batch) out += (out.empty() ? "" : ", ") + name + " " + tensor_text(t);
  return out;
}

}  // namespace tandem::training
