// The one seam where tandem reaches into grpc::internal: StreamBatches served and called
// with the copy-free message types of batch_codec.h in place of the generated ones. The
// bytes on the wire are those of the generated types, so either side may be a generated
// stub (tests use one). The server reads requests as raw bytes and parses them itself
// (parse_request), since gRPC's Read answers false alike for the end of the stream and
// for a message that does not parse. Internal to the transport.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/method_handler.h>

#include "tandem/transport/batch_codec.h"
#include "tandem/v1/data.grpc.pb.h"  // and with it protobuf's SerializationTraits

namespace tandem::transport {

using ServerBatchStream = grpc::ServerReaderWriter<OutgoingBatch, grpc::ByteBuffer>;
using ClientBatchStream = grpc::ClientReaderWriter<v1::BatchRequest, IncomingBatch>;
// The same method as a host's stream relay serves it and calls it (stream_relay.h).
using RelayServerStream = grpc::ServerReaderWriter<RelayedBatch, grpc::ByteBuffer>;
using RelayClientStream = grpc::ClientReaderWriter<v1::BatchRequest, RelayedBatch>;

// StreamBatches as data.proto declares it: the path a client calls and its index among
// DataService's methods (the generated service registers its methods in declaration
// order). Read from the proto's descriptor and checked once: a data.proto whose
// StreamBatches is gone, renamed, not a bidi stream of BatchRequest to Batch, throws
// std::logic_error naming what changed, before anything is served with a wrong method.
struct StreamBatchesMethod {
  std::string path;  // "/tandem.v1.DataService/StreamBatches"
  int index = -1;
};
const StreamBatchesMethod& stream_batches_method();

// A handler for Service::MarkMethodStreamed(stream_batches_method().index, ...) that
// writes OutgoingBatch messages. `service` owns the handler once marked.
grpc::internal::MethodHandler* copy_free_handler(
    grpc::Service* service, std::function<grpc::Status(grpc::ServerContext*, ServerBatchStream*)> serve);

// The same for a relay, which writes RelayedBatch messages.
grpc::internal::MethodHandler* relay_handler(
    grpc::Service* service, std::function<grpc::Status(grpc::ServerContext*, RelayServerStream*)> serve);

// A request read by a ServerBatchStream. Throws PeerError when `raw` is not a
// BatchRequest.
v1::BatchRequest parse_request(grpc::ByteBuffer& raw);

// Calls StreamBatches on `channel`, reading IncomingBatch messages.
std::unique_ptr<ClientBatchStream> open_copy_free(grpc::Channel& channel, grpc::ClientContext& ctx);

// Calls StreamBatches on `channel`, reading RelayedBatch messages (a relay's upstream).
std::unique_ptr<RelayClientStream> open_relayed(grpc::Channel& channel, grpc::ClientContext& ctx);

}  // namespace tandem::transport
