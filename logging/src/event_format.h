// defines: TensorBoard's event-file format, byte by byte, with no protobuf library: the record framing
// (TFRecord: length, masked CRC-32C of the length, data, masked CRC-32C of the data) and the few protobuf messages
// a SummaryWriter writes (Event, Summary.Value with simple_value / histo / tensor + plugin metadata), encoded by
// hand. Field numbers from TensorFlow's event.proto, summary.proto, tensor.proto, tensor_shape.proto. Private to
// logging/ (the tests read it to check the framing).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ember::event_format {

// CRC-32C (Castagnoli), as TFRecord uses it, and its masked form stored in the file.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

// One framed record: u64 length (little-endian), u32 masked CRC of those 8 bytes, the data, u32 masked CRC of it.
std::string frame_record(const std::string& data);

// A protobuf message built field by field (wire types: varint 0, fixed64 1, length-delimited 2, fixed32 5).
class Proto {
 public:
  Proto& varint(int field, uint64_t v);
  Proto& fixed64_double(int field, double v);
  Proto& fixed32_float(int field, float v);
  Proto& bytes(int field, const std::string& v);  // strings, bytes and embedded messages
  Proto& message(int field, const Proto& m) { return bytes(field, m.str()); }
  Proto& packed_doubles(int field, const std::vector<double>& v);
  const std::string& str() const { return s_; }

 private:
  void key(int field, int wire_type);
  void raw_varint(uint64_t v);
  std::string s_;
};

// The serialized Events.
std::string file_version_event(double wall_time);  // the first record of every file: "brain.Event:2"
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;  // bucket i counts values <= bucket_limit[i] (above limit i - 1)
};
std::string histogram_event(double wall_time, int64_t step, const std::string& tag, const Histogram& h);
// Text as PyTorch writes it: tag "<tag>/text_summary", plugin "text", a 1-element string tensor.
std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text);

}  // namespace ember::event_format
