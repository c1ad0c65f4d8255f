// Conversions between tandem's values and their wire form. The payload moves: no copy
// of the pixel bytes on either side (see batch_codec.h).
#pragma once

#include <string>

#include "tandem/data/core/batch.h"
#include "tandem/transport/batch_codec.h"
#include "tandem/transport/worker_info.h"
#include "tandem/v1/data.pb.h"

namespace tandem::transport {

// A batch request (sequence, epoch, sample indices) and back, field for field. Reading
// does not check the indices: the worker's data_worker does, against its dataset.
v1::BatchRequest to_proto(const data::BatchRequest& request);
data::BatchRequest from_proto(const v1::BatchRequest& request);

// Moves the batch's payload into the message.
OutgoingBatch to_wire(data::Batch&& batch);
// A message that tells the trainer its request cannot be served; `bad_data`: because of
// the data itself (from_wire then throws DataError, else PeerError).
OutgoingBatch error_batch(const std::string& why, bool bad_data = false);
// The notice that the worker is leaving (BatchHeader.leaving), with `why`.
OutgoingBatch leaving_notice(const std::string& why);
// Moves the payload out. Throws NetworkError for an error message or an inconsistent
// one (payload size does not match shape x dtype, labels do not match the batch size).
data::Batch from_wire(IncomingBatch&& batch);

// The Info RPC's answer. Reading one makes the peer's words printable (they are logged)
// and throws PeerError for an unknown dtype.
v1::InfoReply to_proto(const WorkerInfo& info);
WorkerInfo from_proto(const v1::InfoReply& reply);

// A dtype and its wire enum. Reading an enum value this tandem does not know throws
// PeerError naming it.
v1::DType to_proto(data::DType dtype);
data::DType from_proto(v1::DType dtype);

}  // namespace tandem::transport
