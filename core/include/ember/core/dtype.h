// defines: DType (kFloat32 default, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool), its size and
// name, type promotion, dtype_of<T>, and visit_dtype(d, f) — the one place a runtime dtype becomes a C++ type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "ember/core/error.h"
#include "ember/core/half.h"
#include "ember/core/op_list.h"

namespace ember {

// DType itself, name(DType) and itemsize(DType) are generated from the dtype list in op_list.h.
inline constexpr DType kFloat32 = DType::kFloat32;
inline constexpr DType kFloat64 = DType::kFloat64;
inline constexpr DType kFloat16 = DType::kFloat16;
inline constexpr DType kBFloat16 = DType::kBFloat16;
inline constexpr DType kInt64 = DType::kInt64;
inline constexpr DType kInt32 = DType::kInt32;
inline constexpr DType kUInt8 = DType::kUInt8;
inline constexpr DType kBool = DType::kBool;

std::ostream& operator<<(std::ostream& os, DType d);
constexpr bool is_floating(DType d) { return d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16; }
constexpr bool is_reduced_float(DType d) { return d == kFloat16 || d == kBFloat16; }
// The dtype of `a op b` (PyTorch's rules for tensor-tensor ops: bool < uint8 < int32 < int64 < floats;
// float16 with bfloat16 gives float32).
DType promote_types(DType a, DType b);

template <class T>
struct dtype_of;
#define EMBER_X(Name, str, size, CpuType, CudaType) \
  template <> \
  struct dtype_of<CpuType> { \
    static constexpr DType value = DType::Name; \
  };
EMBER_DTYPES(EMBER_X)
#undef EMBER_X
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Calls f.template operator()<T>() with T the C++ type of d.
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
#define EMBER_X(Name, str, size, CpuType, CudaType) \
  case DType::Name: \
    return f.template operator()<CpuType>();
    EMBER_DTYPES(EMBER_X)
#undef EMBER_X
  }
  throw InternalError("visit_dtype: bad dtype");
}

}  // namespace ember
