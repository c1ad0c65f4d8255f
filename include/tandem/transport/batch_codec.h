// Copy-free batch messages. gRPC serialises through SerializationTraits<T>; these
// specialisations write a tandem.v1.Batch as [header via protobuf][payload slice that
// owns the batch's memory] and read one by copying the payload once, from the received
// slices into a data::Buffer. The bytes on the wire are an ordinary tandem.v1.Batch.
// batch_method.h plugs them into StreamBatches.
#pragma once

#include <vector>

#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <grpcpp/support/status.h>

#include "tandem/data/core/buffer.h"
#include "tandem/v1/data.pb.h"

namespace tandem::transport {

// Written by a worker. Serialising moves the payload into gRPC, which frees it once sent.
struct OutgoingBatch {
  v1::BatchHeader header;
  mutable data::Buffer payload;
  mutable std::vector<data::Buffer> fields;  // header.fields' bytes, each its own slice
};

// Read by a trainer.
struct IncomingBatch {
  v1::BatchHeader header;
  data::Buffer payload;
  std::vector<data::Buffer> fields;  // the message's `fields` entries, in order
};

// Passed on by a host's stream relay (stream_relay.h): the header is read (and may be
// changed), the rest of the message stays in the slices it arrived in and is sent on
// as they are, copying nothing.
struct RelayedBatch {
  v1::BatchHeader header;
  std::vector<grpc::Slice> rest;  // every field after the header, as received
};

}  // namespace tandem::transport

namespace grpc {

template <>
class SerializationTraits<tandem::transport::OutgoingBatch, void> {
 public:
  static Status Serialize(const tandem::transport::OutgoingBatch& msg, ByteBuffer* buffer, bool* own_buffer);
  static Status Deserialize(ByteBuffer* buffer, tandem::transport::OutgoingBatch* msg);
};

template <>
class SerializationTraits<tandem::transport::IncomingBatch, void> {
 public:
  static Status Serialize(const tandem::transport::IncomingBatch& msg, ByteBuffer* buffer, bool* own_buffer);
  static Status Deserialize(ByteBuffer* buffer, tandem::transport::IncomingBatch* msg);
};

template <>
class SerializationTraits<tandem::transport::RelayedBatch, void> {
 public:
  static Status Serialize(const tandem::transport::RelayedBatch& msg, ByteBuffer* buffer, bool* own_buffer);
  static Status Deserialize(ByteBuffer* buffer, tandem::transport::RelayedBatch* msg);
};

}  // namespace grpc
