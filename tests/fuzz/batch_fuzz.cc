// libFuzzer: a tandem.v1.Batch as a worker (or anyone on the network) might send it,
// through the copy-free decoder and the conversion to a batch. Decodes, or fails with
// a status or PeerError; nothing crashes, and nothing allocates what the bytes merely
// claim.
#include <cstddef>
#include <cstdint>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "tandem/common/error.h"
#include "tandem/transport/batch_codec.h"
#include "tandem/transport/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  grpc::Slice slice(data, size);
  grpc::ByteBuffer buffer(&slice, 1);
  tandem::transport::IncomingBatch msg;
  if (!grpc::SerializationTraits<tandem::transport::IncomingBatch>::Deserialize(&buffer, &msg).ok()) return 0;
  try {
    tandem::transport::from_wire(std::move(msg));
  } catch (const tandem::PeerError&) {  // the one way a malformed batch may fail
  }
  return 0;
}
