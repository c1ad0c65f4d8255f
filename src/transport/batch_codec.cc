#include "tandem/transport/batch_codec.h"

#include <cstring>
#include <string>
#include <vector>

#include <grpcpp/support/slice.h>

namespace grpc {
namespace {

constexpr uint8_t kHeaderTag = (1 << 3) | 2;   // field 1, length-delimited
constexpr uint8_t kPayloadTag = (2 << 3) | 2;  // field 2, length-delimited
constexpr uint8_t kFieldTag = (3 << 3) | 2;    // field 3 (repeated), length-delimited

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Reads the protobuf wire format across the slices of a received message.
class SliceReader {
 public:
  explicit SliceReader(std::vector<Slice> slices) : slices_(std::move(slices)) {
    for (const Slice& s : slices_) left_ += s.size();
  }

  // Bytes not yet read: a length field may claim more, and must not be believed.
  size_t remaining() const { return left_; }

  bool done() {
    while (index_ < slices_.size() && offset_ == slices_[index_].size()) next();
    return index_ >= slices_.size();
  }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      std::byte b;
      if (!copy(&b, 1)) return false;
      v |= static_cast<uint64_t>(b & std::byte{0x7f}) << shift;
      if ((b & std::byte{0x80}) == std::byte{0}) return true;
    }
    return false;
  }
  // The bytes not yet read, as slices of the received ones (nothing copied).
  std::vector<Slice> rest() {
    std::vector<Slice> out;
    for (; !done(); next()) out.push_back(offset_ == 0 ? slices_[index_] : slices_[index_].sub(offset_, slices_[index_].size()));
    left_ = 0;
    return out;
  }
  // Copies n bytes to dst (or skips them when dst is null).
  bool copy(std::byte* dst, size_t n) {
    while (n > 0) {
      if (done()) return false;
      const Slice& s = slices_[index_];
      const size_t take = std::min(n, s.size() - offset_);
      if (dst) {
        std::memcpy(dst, s.begin() + offset_, take);
        dst += take;
      }
      offset_ += take;
      left_ -= take;
      n -= take;
    }
    return true;
  }

 private:
  void next() {
    ++index_;
    offset_ = 0;
  }
  std::vector<Slice> slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
  size_t left_ = 0;
};

// A Batch's header field (tag, length, bytes): how every Batch written here begins.
std::string header_field(const tandem::v1::BatchHeader& h) {
  std::string out;
  const std::string header = h.SerializeAsString();
  out.push_back(static_cast<char>(kHeaderTag));
  put_varint(out, header.size());
  return out + header;
}

Status malformed(const std::string& what) {
  return Status(StatusCode::INTERNAL, "malformed tandem.v1.Batch from the worker: " + what);
}

bool skip_field(SliceReader& in, uint64_t wire_type) {
  uint64_t n;
  switch (wire_type) {
    case 0: return in.varint(n);
    case 1: return in.copy(nullptr, 8);
    case 2: return in.varint(n) && n <= in.remaining() && in.copy(nullptr, n);
    case 5: return in.copy(nullptr, 4);
    default: return false;
  }
}

}  // namespace

Status SerializationTraits<tandem::transport::OutgoingBatch, void>::Serialize(
    const tandem::transport::OutgoingBatch& msg, ByteBuffer* buffer, bool* own_buffer) {
  std::string prefix = header_field(msg.header);
  // Each byte block travels as its own slice, which owns the batch's memory: the tag and
  // length of the next block go into a small slice of their own.
  std::vector<Slice> slices;
  auto append = [&](std::string& head, uint8_t tag, tandem::data::Buffer& bytes) {
    const size_t size = bytes.size();
    head.push_back(static_cast<char>(tag));
    put_varint(head, size);
    slices.emplace_back(head);
    if (size > 0) {
      const tandem::data::BufferBlock owned = bytes.release();
      slices.emplace_back(owned.data, size, owned.free, owned.context);
    }
  };
  append(prefix, kPayloadTag, msg.payload);
  for (tandem::data::Buffer& field : msg.fields) {
    std::string head;
    append(head, kFieldTag, field);
  }
  *buffer = ByteBuffer(slices.data(), slices.size());
  *own_buffer = true;
  return Status::OK;
}

Status SerializationTraits<tandem::transport::OutgoingBatch, void>::Deserialize(ByteBuffer*,
                                                                             tandem::transport::OutgoingBatch*) {
  return Status(StatusCode::UNIMPLEMENTED, "workers do not read batches");
}

Status SerializationTraits<tandem::transport::IncomingBatch, void>::Serialize(const tandem::transport::IncomingBatch&,
                                                                           ByteBuffer*, bool*) {
  return Status(StatusCode::UNIMPLEMENTED, "trainers do not send batches");
}

Status SerializationTraits<tandem::transport::IncomingBatch, void>::Deserialize(
    ByteBuffer* buffer, tandem::transport::IncomingBatch* msg) {
  std::vector<Slice> slices;
  if (!buffer->Dump(&slices).ok()) return malformed("unreadable buffer");
  buffer->Clear();
  SliceReader in(std::move(slices));
  while (!in.done()) {
    uint64_t tag, size;
    if (!in.varint(tag)) return malformed("truncated tag");
    if (tag == kHeaderTag || tag == kPayloadTag || tag == kFieldTag) {
      if (!in.varint(size)) return malformed("truncated length");
      // Allocate only what arrived: a length field alone must not make us reserve gigabytes.
      if (size > in.remaining()) return malformed("a field claims more bytes than the message holds");
      if (tag == kHeaderTag) {
        std::string header(size, '\0');
        if (!in.copy(reinterpret_cast<std::byte*>(header.data()), size) || !msg->header.ParseFromString(header)) {
          return malformed("bad header");
        }
      } else {
        tandem::data::Buffer& into = tag == kPayloadTag ? msg->payload : msg->fields.emplace_back();
        into = tandem::data::Buffer(size);
        if (!in.copy(into.data(), size)) return malformed("payload shorter than its length");
      }
    } else if (!skip_field(in, tag & 7)) {
      return malformed("bad field " + std::to_string(tag >> 3));
    }
  }
  return Status::OK;
}

Status SerializationTraits<tandem::transport::RelayedBatch, void>::Serialize(
    const tandem::transport::RelayedBatch& msg, ByteBuffer* buffer, bool* own_buffer) {
  std::string prefix = header_field(msg.header);
  std::vector<Slice> slices;
  slices.reserve(msg.rest.size() + 1);
  slices.emplace_back(prefix);
  slices.insert(slices.end(), msg.rest.begin(), msg.rest.end());
  *buffer = ByteBuffer(slices.data(), slices.size());
  *own_buffer = true;
  return Status::OK;
}

// The header is the message's first field, as every writer of a Batch puts it (protobuf
// writes fields in number order); a message without one has an empty header.
Status SerializationTraits<tandem::transport::RelayedBatch, void>::Deserialize(
    ByteBuffer* buffer, tandem::transport::RelayedBatch* msg) {
  std::vector<Slice> slices;
  if (!buffer->Dump(&slices).ok()) return malformed("unreadable buffer");
  buffer->Clear();
  SliceReader in(std::move(slices));
  SliceReader peek = in;
  uint64_t tag = 0, size = 0;
  if (peek.varint(tag) && tag == kHeaderTag) {
    in = std::move(peek);
    if (!in.varint(size) || size > in.remaining()) return malformed("truncated header");
    std::string header(size, '\0');
    if (!in.copy(reinterpret_cast<std::byte*>(header.data()), size) || !msg->header.ParseFromString(header)) {
      return malformed("bad header");
    }
  }
  msg->rest = in.rest();
  return Status::OK;
}

}  // namespace grpc
