#include "batch_method.h"

#include <stdexcept>
#include <string>

#include <google/protobuf/descriptor.h>

#include "tandem/common/error.h"

namespace tandem::transport {
namespace {

StreamBatchesMethod find_stream_batches() {
  const auto fail = [](const std::string& what) -> StreamBatchesMethod {
    throw std::logic_error("tandem.v1.DataService." + what +
                           ": the copy-free batch stream (batch_method.cc) no longer matches data.proto");
  };
  const google::protobuf::ServiceDescriptor* service =
      v1::BatchRequest::descriptor()->file()->FindServiceByName("DataService");
  if (!service) return fail("DataService is not declared");
  const google::protobuf::MethodDescriptor* m = service->FindMethodByName("StreamBatches");
  if (!m) return fail("StreamBatches is not declared");
  if (!m->client_streaming() || !m->server_streaming()) return fail("StreamBatches is not a bidi stream");
  if (m->input_type() != v1::BatchRequest::descriptor()) return fail("StreamBatches does not take BatchRequest");
  if (m->output_type() != v1::Batch::descriptor()) return fail("StreamBatches does not return Batch");
  return {"/" + service->full_name() + "/" + m->name(), m->index()};
}

template <class Out>
grpc::internal::MethodHandler* handler_writing(
    grpc::Service* service,
    std::function<grpc::Status(grpc::ServerContext*, grpc::ServerReaderWriter<Out, grpc::ByteBuffer>*)> serve) {
  return new grpc::internal::BidiStreamingHandler<grpc::Service, grpc::ByteBuffer, Out>(
      [serve = std::move(serve)](grpc::Service*, grpc::ServerContext* ctx,
                                 grpc::ServerReaderWriter<Out, grpc::ByteBuffer>* stream) { return serve(ctx, stream); },
      service);
}

template <class In>
std::unique_ptr<grpc::ClientReaderWriter<v1::BatchRequest, In>> open_reading(grpc::Channel& channel,
                                                                             grpc::ClientContext& ctx) {
  const grpc::internal::RpcMethod method(stream_batches_method().path.c_str(),
                                         grpc::internal::RpcMethod::BIDI_STREAMING, channel.shared_from_this());
  return std::unique_ptr<grpc::ClientReaderWriter<v1::BatchRequest, In>>(
      grpc::internal::ClientReaderWriterFactory<v1::BatchRequest, In>::Create(&channel, method, &ctx));
}

}  // namespace

const StreamBatchesMethod& stream_batches_method() {
  static const StreamBatchesMethod method = find_stream_batches();
  return method;
}

grpc::internal::MethodHandler* copy_free_handler(
    grpc::Service* service, std::function<grpc::Status(grpc::ServerContext*, ServerBatchStream*)> serve) {
  return handler_writing<OutgoingBatch>(service, std::move(serve));
}

grpc::internal::MethodHandler* relay_handler(
    grpc::Service* service, std::function<grpc::Status(grpc::ServerContext*, RelayServerStream*)> serve) {
  return handler_writing<RelayedBatch>(service, std::move(serve));
}

v1::BatchRequest parse_request(grpc::ByteBuffer& raw) {
  const size_t bytes = raw.Length();
  v1::BatchRequest request;
  if (!grpc::SerializationTraits<v1::BatchRequest>::Deserialize(&raw, &request).ok()) {
    throw PeerError("a malformed request (" + std::to_string(bytes) +
                    " bytes that are not a tandem.v1.BatchRequest): only a tandem trainer of this version may stream "
                    "from a data worker");
  }
  return request;
}

std::unique_ptr<ClientBatchStream> open_copy_free(grpc::Channel& channel, grpc::ClientContext& ctx) {
  return open_reading<IncomingBatch>(channel, ctx);
}

std::unique_ptr<RelayClientStream> open_relayed(grpc::Channel& channel, grpc::ClientContext& ctx) {
  return open_reading<RelayedBatch>(channel, ctx);
}

}  // namespace tandem::transport
