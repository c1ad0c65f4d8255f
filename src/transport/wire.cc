#include "tandem/transport/wire.h"

#include <string>

#include "tandem/common/error.h"

namespace tandem::transport {

v1::BatchRequest to_proto(const data::BatchRequest& request) {
  v1::BatchRequest out;
  out.set_sequence(request.sequence);
  out.set_epoch(request.epoch);
  out.mutable_indices()->Add(request.indices.begin(), request.indices.end());
  return out;
}

data::BatchRequest from_proto(const v1::BatchRequest& request) {
  data::BatchRequest out;
  out.sequence = request.sequence();
  out.epoch = request.epoch();
  out.indices.assign(request.indices().begin(), request.indices().end());
  return out;
}

v1::DType to_proto(data::DType dtype) {
  switch (dtype) {
    case data::DType::kFloat32: return v1::FLOAT32;
    case data::DType::kBFloat16: return v1::BFLOAT16;
    case data::DType::kFloat16: return v1::FLOAT16;
    case data::DType::kUInt8: return v1::UINT8;
  }
  return v1::DTYPE_UNSPECIFIED;
}

data::DType from_proto(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return data::DType::kFloat32;
    case v1::BFLOAT16: return data::DType::kBFloat16;
    case v1::FLOAT16: return data::DType::kFloat16;
    case v1::UINT8: return data::DType::kUInt8;
    default: throw NetworkError("peer sent a batch with unknown dtype " + std::to_string(dtype));
  }
}

void to_proto(data::Batch&& batch, v1::Batch* out) {
  out->set_sequence(batch.sequence);
  out->set_epoch(batch.epoch);
  out->mutable_shape()->Add(batch.shape.begin(), batch.shape.end());
  out->set_dtype(to_proto(batch.dtype));
  out->mutable_labels()->Add(batch.labels.begin(), batch.labels.end());
  out->mutable_data()->swap(batch.data);
  out->set_compute_seconds(batch.compute_seconds);
}

data::Batch from_proto(v1::Batch&& batch) {
  if (!batch.error().empty()) {
    throw NetworkError("it refused a request: " + batch.error());
  }
  data::Batch out;
  out.sequence = batch.sequence();
  out.epoch = batch.epoch();
  out.shape.assign(batch.shape().begin(), batch.shape().end());
  out.dtype = from_proto(batch.dtype());
  out.labels.assign(batch.labels().begin(), batch.labels().end());
  out.data.swap(*batch.mutable_data());
  out.compute_seconds = batch.compute_seconds();
  size_t expected = data::dtype_size(out.dtype);
  for (int64_t d : out.shape) expected *= d < 0 ? 0 : static_cast<size_t>(d);
  if (out.shape.empty() || out.data.size() != expected ||
      static_cast<int64_t>(out.labels.size()) != out.shape[0]) {
    throw NetworkError("peer sent an inconsistent batch " + std::to_string(out.sequence) + ": " +
                       std::to_string(out.data.size()) + " payload bytes, " +
                       std::to_string(expected) + " expected from its shape, " +
                       std::to_string(out.labels.size()) + " labels");
  }
  return out;
}

}  // namespace tandem::transport
