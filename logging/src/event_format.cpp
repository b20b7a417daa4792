// defines: the event-file encoding of event_format.h: CRC-32C, record framing, protobuf fields, the Events.
#include "event_format.h"

#include <cstring>

#include "ember/core/file_io.h"

namespace ember::event_format {
namespace {

void put_le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Event fields (event.proto) and Summary.Value fields (summary.proto).
enum EventField { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5 };
enum ValueField { kTag = 1, kSimpleValue = 2, kHisto = 5, kTensor = 8, kMetadata = 9 };
constexpr int kSummaryValue = 1;   // Summary.value (repeated)
constexpr uint64_t kDtString = 7;  // types.proto DT_STRING

std::string event_with(double wall_time, int64_t step, const Proto& value) {
  Proto summary;
  summary.message(kSummaryValue, value);
  Proto event;
  event.fixed64_double(kWallTime, wall_time).varint(kStep, static_cast<uint64_t>(step)).message(kSummary, summary);
  return event.str();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) { return ember::crc32c(data, n); }

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string frame_record(const std::string& data) {
  std::string len;
  put_le(len, data.size(), 8);
  std::string out = len;
  put_le(out, masked_crc32c(len.data(), len.size()), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

void Proto::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    s_ += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  s_ += static_cast<char>(v);
}
void Proto::key(int field, int wire_type) { raw_varint((static_cast<uint64_t>(field) << 3) | wire_type); }

Proto& Proto::varint(int field, uint64_t v) {
  key(field, 0);
  raw_varint(v);
  return *this;
}
Proto& Proto::fixed64_double(int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  key(field, 1);
  put_le(s_, bits, 8);
  return *this;
}
Proto& Proto::fixed32_float(int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  key(field, 5);
  put_le(s_, bits, 4);
  return *this;
}
Proto& Proto::bytes(int field, const std::string& v) {
  key(field, 2);
  raw_varint(v.size());
  s_ += v;
  return *this;
}
Proto& Proto::packed_doubles(int field, const std::vector<double>& v) {
  std::string body;
  for (double d : v) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    put_le(body, bits, 8);
  }
  return bytes(field, body);
}

std::string file_version_event(double wall_time) {
  Proto event;
  event.fixed64_double(kWallTime, wall_time).bytes(kFileVersion, "brain.Event:2");
  return event.str();
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  Proto v;
  v.bytes(kTag, tag).fixed32_float(kSimpleValue, value);
  return event_with(wall_time, step, v);
}

std::string histogram_event(double wall_time, int64_t step, const std::string& tag, const Histogram& h) {
  Proto histo;  // HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7
  histo.fixed64_double(1, h.min).fixed64_double(2, h.max).fixed64_double(3, h.num).fixed64_double(4, h.sum);
  histo.fixed64_double(5, h.sum_squares).packed_doubles(6, h.bucket_limit).packed_doubles(7, h.bucket);
  Proto v;
  v.bytes(kTag, tag).message(kHisto, histo);
  return event_with(wall_time, step, v);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text) {
  Proto plugin;  // SummaryMetadata.PluginData: plugin_name 1
  plugin.bytes(1, "text");
  Proto metadata;  // SummaryMetadata: plugin_data 1
  metadata.message(1, plugin);
  Proto dim;  // TensorShapeProto.Dim: size 1
  dim.varint(1, 1);
  Proto shape;  // TensorShapeProto: dim 2
  shape.message(2, dim);
  Proto tensor;  // TensorProto: dtype 1, tensor_shape 2, string_val 8
  tensor.varint(1, kDtString).message(2, shape).bytes(8, text);
  Proto v;
  v.bytes(kTag, tag + "/text_summary").message(kTensor, tensor).message(kMetadata, metadata);
  return event_with(wall_time, step, v);
}

}  // namespace ember::event_format
