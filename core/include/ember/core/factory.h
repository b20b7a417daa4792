// defines: the creation functions (zeros, ones, full, empty, arange, rand, randn, randint, tensor, from_blob,
// *_like), manual_seed, and the CPU threading knobs set_num_threads / get_num_threads.
//
//   auto x = ember::randn({64, 784});                       // float32 on the CPU
//   auto y = ember::tensor<int64_t>({1, 2, 3}, {3});        // copies the vector
//   auto z = ember::zeros({2, 3}, {.dtype = ember::kFloat64});
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ember/core/generator.h"
#include "ember/core/tensor.h"

namespace ember {

Tensor empty(const Shape& shape, const TensorOptions& opts = {});
// Uninitialised, laid out in `format` (ChannelsLast: a 4-D shape, NHWC in memory), as torch.empty(memory_format=).
Tensor empty(const Shape& shape, const TensorOptions& opts, MemoryFormat format);
Tensor zeros(const Shape& shape, const TensorOptions& opts = {});
Tensor ones(const Shape& shape, const TensorOptions& opts = {});
Tensor full(const Shape& shape, Scalar value, const TensorOptions& opts = {});
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor empty_like(const Tensor& x);
Tensor full_like(const Tensor& x, Scalar value);
// 0, 1, ..., n-1 (kInt64 unless opts.dtype says otherwise); arange(start, end, step) as in NumPy.
Tensor arange(int64_t n, const TensorOptions& opts = {.dtype = kInt64});
Tensor arange(double start, double end, double step, const TensorOptions& opts = {.dtype = kInt64});
Tensor rand(const Shape& shape, const TensorOptions& opts = {});   // uniform [0, 1)
Tensor randn(const Shape& shape, const TensorOptions& opts = {});  // standard normal
Tensor uniform(const Shape& shape, double lo, double hi, const TensorOptions& opts = {});
Tensor normal(const Shape& shape, double mean, double std, const TensorOptions& opts = {});
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& opts = {.dtype = kInt64});
// A random permutation of 0..n-1 (kInt64), from opts.generator or the current generator.
Tensor randperm(int64_t n, const TensorOptions& opts = {.dtype = kInt64});

// Copies `values` into a new tensor of `shape` (default: 1-D); opts.dtype defaults to T's dtype.
Tensor tensor_from_raw(const void* data, DType src_dtype, int64_t count, const Shape& shape, const TensorOptions& opts);
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape, TensorOptions opts) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return tensor_from_raw(bytes.data(), kBool, static_cast<int64_t>(bytes.size()), shape, opts);
  } else {
    return tensor_from_raw(values.data(), dtype_of_v<T>, static_cast<int64_t>(values.size()), shape, opts);
  }
}
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& shape) {
  return tensor(values, shape, TensorOptions{.dtype = dtype_of_v<T>});
}
template <class T>
Tensor tensor(const std::vector<T>& values) {
  return tensor(values, Shape{static_cast<int64_t>(values.size())});
}
// Wraps caller-owned memory without copying; the caller keeps it alive (or passes a deleter).
Tensor from_blob(void* data, const Shape& shape, const TensorOptions& opts = {},
                 std::function<void(void*)> deleter = {});

// Random draws use a counter-based stream (Philox4x32-10, generator.h): element i of a draw depends only on
// (seed, offset, i), so results do not depend on the number of threads, and the CUDA backend reproduces them.
// Seeds the global generator, which serves every device: same seed, same numbers, whatever the thread count.
void manual_seed(uint64_t seed);
// The global generator's state, to replay a stretch of random numbers (checkpointing does).
PhiloxState get_rng_state();
void set_rng_state(const PhiloxState& state);
// Reserves `blocks` 128-bit Philox blocks from `g` (null: the current generator, generator.h) and returns where
// they start.
PhiloxState next_philox(uint64_t blocks, Generator* g = nullptr);

// CPU kernels' threads (OpenMP). Default: the machine's cores. Small tensors always stay on one thread.
void set_num_threads(int n);
int get_num_threads();
// The CPU kernel variant in use: "avx2" or "avx512" (chosen once per process from the CPU; EMBER_CPU_ISA=avx2 or
// avx512 overrides it).
std::string cpu_isa();
// The bfloat16 GEMM behind bf16 matmul / linear on the CPU: "amx" (Intel AMX tiles), "avx512bf16" (AVX512-BF16 dot
// products) or "off" (none of them on this CPU: bf16 operands are widened to float32). Chosen once per process;
// EMBER_BF16_GEMM=off|avx512bf16|amx overrides it.
std::string cpu_bf16_gemm();

}  // namespace ember
