// Conversions between tandem's values and their protobuf form. The payload moves:
// no copy of the pixel bytes on either side.
#pragma once

#include "tandem/data/batch.h"
#include "tandem/v1/data.pb.h"

namespace tandem::transport {

v1::BatchRequest to_proto(const data::BatchRequest& request);
data::BatchRequest from_proto(const v1::BatchRequest& request);

// Moves batch.data into the message.
void to_proto(data::Batch&& batch, v1::Batch* out);
// Moves the message's payload out. Throws NetworkError if the message is inconsistent
// (payload size does not match shape x dtype, labels do not match the batch size).
data::Batch from_proto(v1::Batch&& batch);

v1::DType to_proto(data::DType dtype);
data::DType from_proto(v1::DType dtype);

}  // namespace tandem::transport
