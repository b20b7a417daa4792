// defines: the plain host launchers of the CUDA kernels in this folder (llm.c style: raw pointers, sizes
// and strides in small structs, a stream), and the types they take. This header is the seam between the
// C++20 backend (cuda_backend.cpp) and the .cu files, which are C++17: it includes no ember or CUDA header.
//
//   kernels::Layout layout = ...;        // coalesced dims, see cuda_backend.cpp
//   kernels::launch_copy_cast(dst, src, layout, stream);
#pragma once
#include <cstdint>

struct CUstream_st;

namespace ember::cuda::kernels {

// Element types, numbered as ember::DType (cuda_backend.cpp static_asserts that they agree).
enum class ScalarType : int { Float32, Float64, Float16, BFloat16, Int64, Int32, UInt8, Bool };

// Most dims a kernel takes after adjacent dims have been merged (a contiguous tensor has one).
constexpr int kMaxDims = 16;

// The index space every operand of a launch shares: `ndim` sizes, walked in row-major order.
struct Layout {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
};

// One tensor: the address of its element 0, its element type, and its strides (in elements) over the
// Layout's dims. A stride may be 0 (a broadcast input).
struct Operand {
  void* data = nullptr;
  ScalarType type = ScalarType::Float32;
  int64_t strides[kMaxDims] = {};
};

// dst[i] = convert(src[i]) for every index i of `layout` (any dtypes, any strides; CPU conversion rules:
// float -> int saturates and maps NaN to 0, x -> bool is x != 0). dst must not partly overlap src.
void launch_copy_cast(const Operand& dst, const Operand& src, const Layout& layout, CUstream_st* stream);

// dst[i] = value converted to dst's type, for every index i of `layout`.
void launch_fill(const Operand& dst, double value, const Layout& layout, CUstream_st* stream);

}  // namespace ember::cuda::kernels
