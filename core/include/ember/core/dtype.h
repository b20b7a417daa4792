// defines: DType (kFloat32 default, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool), its size and
// name, type promotion, dtype_of<T>, and visit_dtype(d, f) — the one place a runtime dtype becomes a C++ type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "ember/core/error.h"
#include "ember/core/half.h"

namespace ember {

enum class DType : uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool };
inline constexpr DType kFloat32 = DType::kFloat32;
inline constexpr DType kFloat64 = DType::kFloat64;
inline constexpr DType kFloat16 = DType::kFloat16;
inline constexpr DType kBFloat16 = DType::kBFloat16;
inline constexpr DType kInt64 = DType::kInt64;
inline constexpr DType kInt32 = DType::kInt32;
inline constexpr DType kUInt8 = DType::kUInt8;
inline constexpr DType kBool = DType::kBool;

size_t itemsize(DType d);
const char* name(DType d);  // "float32", "int64", ...
std::ostream& operator<<(std::ostream& os, DType d);
constexpr bool is_floating(DType d) {
  return d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16;
}
constexpr bool is_reduced_float(DType d) { return d == kFloat16 || d == kBFloat16; }
// The dtype of `a op b` (PyTorch's rules for tensor-tensor ops: bool < uint8 < int32 < int64 < floats;
// float16 with bfloat16 gives float32).
DType promote_types(DType a, DType b);

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = kFloat32; };
template <> struct dtype_of<double> { static constexpr DType value = kFloat64; };
template <> struct dtype_of<Half> { static constexpr DType value = kFloat16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = kBFloat16; };
template <> struct dtype_of<int64_t> { static constexpr DType value = kInt64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = kInt32; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = kUInt8; };
template <> struct dtype_of<bool> { static constexpr DType value = kBool; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Calls f.template operator()<T>() with T the C++ type of d.
template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::kFloat32: return f.template operator()<float>();
    case DType::kFloat64: return f.template operator()<double>();
    case DType::kFloat16: return f.template operator()<Half>();
    case DType::kBFloat16: return f.template operator()<BFloat16>();
    case DType::kInt64: return f.template operator()<int64_t>();
    case DType::kInt32: return f.template operator()<int32_t>();
    case DType::kUInt8: return f.template operator()<uint8_t>();
    case DType::kBool: return f.template operator()<bool>();
  }
  throw InternalError("visit_dtype: bad dtype");
}

}  // namespace ember
