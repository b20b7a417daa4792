// defines: DType printing and promotion (names and sizes come from op_list.h), and Device printing.
#include <ostream>

#include "ember/core/device.h"
#include "ember/core/dtype.h"

namespace ember {

// --- DType (names and sizes: op_list.h)
std::ostream& operator<<(std::ostream& os, DType d) { return os << name(d); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // A rank for each dtype: bool < uint8 < int32 < int64 < float16/bfloat16 < float32 < float64.
  auto rank = [](DType d) {
    switch (d) {
      case kBool:
        return 0;
      case kUInt8:
        return 1;
      case kInt32:
        return 2;
      case kInt64:
        return 3;
      case kFloat16:
      case kBFloat16:
        return 4;
      case kFloat32:
        return 5;
      case kFloat64:
        return 6;
    }
    return 0;
  };
  if (rank(a) == 4 && rank(b) == 4) return kFloat32;  // float16 with bfloat16
  return rank(a) >= rank(b) ? a : b;
}

// --- Device
std::string Device::to_string() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index_); }
std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.to_string(); }

}  // namespace ember
