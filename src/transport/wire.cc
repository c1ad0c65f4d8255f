#include "tandem/transport/wire.h"

#include <algorithm>
#include <string>

#include "tandem/common/error.h"
#include "tandem/common/text.h"

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

v1::InfoReply to_proto(const WorkerInfo& info) {
  v1::InfoReply reply;
  const data::DatasetInfo& d = info.dataset;
  reply.set_dataset(d.name);
  reply.set_size(d.size);
  reply.set_fingerprint(d.fingerprint);
  reply.set_fingerprint_description(d.description);
  reply.mutable_sample_shape()->Add(d.sample_shape.begin(), d.sample_shape.end());
  reply.set_dtype(to_proto(d.dtype));
  reply.set_num_classes(static_cast<uint32_t>(d.num_classes));
  reply.mutable_mean()->Add(d.mean.begin(), d.mean.end());
  reply.mutable_std()->Add(d.std.begin(), d.std.end());
  for (const std::string& name : d.class_names) reply.add_class_names(name);
  for (const data::FieldSpec& f : d.fields) {
    v1::FieldSpec* spec = reply.add_fields();
    spec->set_name(f.name);
    spec->set_dtype(to_proto(f.dtype));
    spec->mutable_shape()->Add(f.shape.begin(), f.shape.end());
  }
  reply.set_threads(static_cast<uint32_t>(info.threads));
  reply.set_host(info.host);
  for (const std::string& s : info.skipped) reply.add_skipped(s);
  reply.set_skipped_count(info.skipped_count);
  reply.set_determinism_problem(info.determinism_problem);
  reply.set_instance(info.instance);
  if (info.pool) {
    v1::PoolTally* t = reply.mutable_pool();
    t->set_samples_served(info.pool->samples_served);
    t->set_samples_made(info.pool->samples_made);
    t->set_samples_shared(info.pool->samples_shared);
  }
  return reply;
}

WorkerInfo from_proto(const v1::InfoReply& reply) {
  WorkerInfo info;
  data::DatasetInfo& d = info.dataset;
  d.name = reply.dataset();
  d.size = reply.size();
  d.fingerprint = reply.fingerprint();
  // Only ever quoted through describe_difference, which shortens and escapes each value.
  if (reply.fingerprint_description().size() <= 64 * 1024) d.description = reply.fingerprint_description();
  d.sample_shape.assign(reply.sample_shape().begin(), reply.sample_shape().end());
  d.dtype = from_proto(reply.dtype());
  d.num_classes = static_cast<int>(std::min<uint32_t>(reply.num_classes(), 1u << 30));
  d.mean.assign(reply.mean().begin(), reply.mean().end());
  d.std.assign(reply.std().begin(), reply.std().end());
  d.class_names.assign(reply.class_names().begin(), reply.class_names().end());  // checked by info_problem
  for (const v1::FieldSpec& f : reply.fields()) {  // checked by info_problem
    d.fields.push_back({f.name(), from_proto(f.dtype()), {f.shape().begin(), f.shape().end()}});
  }
  info.threads = static_cast<int>(reply.threads());
  info.host = printable(reply.host(), 80);
  for (const auto& s : reply.skipped()) info.skipped.push_back(printable(s));
  info.skipped_count = reply.skipped_count();
  info.determinism_problem = reply.determinism_problem();
  info.instance = printable(reply.instance(), 40);
  if (reply.has_pool()) {
    info.pool = WorkerInfo::PoolTally{reply.pool().samples_served(), reply.pool().samples_made(),
                                      reply.pool().samples_shared()};
  }
  return info;
}

v1::DType to_proto(data::DType dtype) {
  switch (dtype) {
    case data::DType::kFloat32: return v1::FLOAT32;
    case data::DType::kBFloat16: return v1::BFLOAT16;
    case data::DType::kFloat16: return v1::FLOAT16;
    case data::DType::kUInt8: return v1::UINT8;
    case data::DType::kInt32: return v1::INT32;
    case data::DType::kInt64: return v1::INT64;
  }
  return v1::DTYPE_UNSPECIFIED;
}

data::DType from_proto(v1::DType dtype) {
  switch (dtype) {
    case v1::FLOAT32: return data::DType::kFloat32;
    case v1::BFLOAT16: return data::DType::kBFloat16;
    case v1::FLOAT16: return data::DType::kFloat16;
    case v1::UINT8: return data::DType::kUInt8;
    case v1::INT32: return data::DType::kInt32;
    case v1::INT64: return data::DType::kInt64;
    default: throw PeerError("peer sent a batch with unknown dtype " + std::to_string(dtype));
  }
}

OutgoingBatch to_wire(data::Batch&& batch) {
  OutgoingBatch out;
  v1::BatchHeader& h = out.header;
  h.set_sequence(batch.sequence);
  h.set_epoch(batch.epoch);
  h.mutable_shape()->Add(batch.shape.begin(), batch.shape.end());
  h.set_dtype(to_proto(batch.dtype));
  h.mutable_labels()->Add(batch.labels.begin(), batch.labels.end());
  h.mutable_indices()->Add(batch.indices.begin(), batch.indices.end());
  h.set_compute_seconds(batch.compute_seconds);
  h.set_reads_wanted(batch.reads_wanted);
  if (batch.digest) h.set_digest(*batch.digest);
  out.payload = std::move(batch.data);
  for (data::Field& f : batch.fields) {
    v1::FieldHeader* fh = h.add_fields();
    fh->set_name(f.name);
    fh->set_dtype(to_proto(f.dtype));
    fh->mutable_shape()->Add(f.shape.begin(), f.shape.end());
    fh->mutable_lengths()->Add(f.lengths.begin(), f.lengths.end());
    out.fields.push_back(std::move(f.data));
  }
  return out;
}

namespace {

// The batch's named fields, each checked against its own shape (the schema is checked by
// data::batch_problem).
std::vector<data::Field> fields_from_wire(const v1::BatchHeader& h, std::vector<data::Buffer>&& bytes) {
  if (static_cast<size_t>(h.fields_size()) != bytes.size()) {
    throw PeerError("it sent batch " + std::to_string(h.sequence()) + " with " + std::to_string(h.fields_size()) +
                    " field headers for " + std::to_string(bytes.size()) + " field payloads");
  }
  std::vector<data::Field> out(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    const v1::FieldHeader& fh = h.fields(static_cast<int>(i));
    data::Field& f = out[i];
    f.name = printable(fh.name(), 100);
    f.dtype = from_proto(fh.dtype());
    f.shape.assign(fh.shape().begin(), fh.shape().end());
    f.lengths.assign(fh.lengths().begin(), fh.lengths().end());
    f.data = std::move(bytes[i]);
    if (f.shape.empty() || f.data.size() != f.expected_bytes()) {
      throw PeerError("it sent batch " + std::to_string(h.sequence()) + " with field '" + f.name + "' of " +
                      std::to_string(f.data.size()) + " bytes, which does not match its shape");
    }
  }
  return out;
}

}  // namespace

OutgoingBatch error_batch(const std::string& why, bool bad_data) {
  OutgoingBatch out;
  out.header.set_error(why);
  out.header.set_bad_data(bad_data);
  return out;
}

OutgoingBatch leaving_notice(const std::string& why) {
  OutgoingBatch out;
  out.header.set_leaving(why.empty() ? std::string("leaving") : why);
  return out;
}

data::Batch from_wire(IncomingBatch&& batch) {
  const v1::BatchHeader& h = batch.header;
  if (!h.error().empty() && h.bad_data()) throw DataError("it could not use the data: " + printable(h.error(), 300));
  if (!h.error().empty()) throw PeerError("it refused a request: " + printable(h.error(), 300));
  data::Batch out;
  out.sequence = h.sequence();
  out.epoch = h.epoch();
  out.shape.assign(h.shape().begin(), h.shape().end());
  out.dtype = from_proto(h.dtype());
  out.labels.assign(h.labels().begin(), h.labels().end());
  out.indices.assign(h.indices().begin(), h.indices().end());
  out.data = std::move(batch.payload);
  out.compute_seconds = h.compute_seconds();
  out.reads_wanted = h.reads_wanted();
  if (h.has_digest()) out.digest = h.digest();
  // Without an image the shape is [N] and there is no payload; without a label, no labels.
  size_t expected = out.shape.size() == 1 ? 0 : data::dtype_size(out.dtype);
  for (int64_t d : out.shape) expected *= d < 0 ? 0 : static_cast<size_t>(d);
  if (out.shape.empty() || out.data.size() != expected ||
      (!out.labels.empty() && static_cast<int64_t>(out.labels.size()) != out.shape[0])) {
    throw PeerError("it sent an inconsistent batch " + std::to_string(out.sequence) + ": " +
                       std::to_string(out.data.size()) + " payload bytes, " + std::to_string(expected) +
                       " expected from its shape, " + std::to_string(out.labels.size()) + " labels");
  }
  out.fields = fields_from_wire(h, std::move(batch.fields));
  return out;
}

}  // namespace tandem::transport
