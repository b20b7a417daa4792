// defines: bf16_gemm, the bfloat16 GEMM of the CPU backend on CPUs with bfloat16 dot-product instructions: AMX
// tiles (Intel Sapphire Rapids and later, where the OS grants the tile state) or AVX512-BF16 (Intel Cooper Lake,
// AMD Zen 4 and later). Products of bf16 pairs are summed in float32, as PyTorch's oneDNN path does. Elsewhere
// bf16_gemm_path() is None and callers widen to float32 (core/cpu/linalg.cpp). Compiled once, not per ISA variant
// (isa.h): the kernels come from bf16_gemm_native.cpp, built with the instruction sets and entered only after
// CPUID says they run. Private to core/.
#pragma once
#include <cstdint>

namespace ember::cpu {

enum class Bf16Path { None, Avx512Bf16, Amx };
const char* name(Bf16Path p);
// Whether this CPU and its OS can run the path: CPUID and XGETBV, and for AMX the permission to use tile data
// (Linux's arch_prctl(ARCH_REQ_XCOMP_PERM), asked for once per process).
bool supports(Bf16Path p);
// The path in use, chosen once: EMBER_BF16_GEMM=off|avx512bf16|amx if set (one this CPU cannot run is refused with
// a note on stderr), else the fastest one supported.
Bf16Path bf16_gemm_path();

// C[M, N] (float32, row stride ldc) = A[M, K] @ B[K, N], or += when accumulate. A and B hold bfloat16 bit patterns
// at any element strides (rs = row stride, cs = column stride). Uses up to `threads` pool threads. Returns false,
// leaving C alone, when bf16_gemm_path() is None.
bool bf16_gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs, int64_t a_cs, const uint16_t* B,
               int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool accumulate, int threads);

// ---- The seam between the driver (packing, blocking, threads: bf16_gemm.cpp, plain C++) and the kernels
// (bf16_kernels.h, instantiated natively in bf16_gemm_native.cpp and over an emulation of the instructions in
// tests/core/test_bf16_gemm.cpp, so the whole driver is tested on any CPU).
//
// Both kernels consume K in pairs: one uint32 holds the bf16 of rows 2p (low half) and 2p + 1 (high half) of a
// column of B, or columns 2p and 2p + 1 of a row of A; an odd K gets a zero last row. K is cut into slices of at
// most kBf16SlicePairs pairs, each padded with zero pairs to a multiple of the kernel's `group`.
//  - packed B, slice after slice: each slice [kp pairs, npad columns] holds its 32-column panels one after the
//    other, a panel pair-major (uint32 index p * 32 + column); npad is N rounded up to 32, padding columns zero.
//  - packed A: panels of `mr` rows (rows past M zero); in a panel, pair p of row r is at
//    (p / group) * (mr * group) + r * group + p % group: for group 1 the mr pairs of one p side by side (broadcast
//    one at a time by the AVX512-BF16 kernel), for group 16 a 16-pair-wide row-major block per 16 pairs (the rows
//    of an AMX tile).
inline constexpr int64_t kBf16NR = 32;
inline constexpr int64_t kBf16SlicePairs = 256;  // a 256-pair x 32-column panel of B: 32 KiB

struct Bf16Kernel {
  Bf16Path path;
  int mr;     // rows per A panel
  int group;  // pair padding and A packing group (see above)
  // C[rows, cols] (+)= A panel [mr x kp pairs] @ B panel [kp pairs x 32]; rows <= mr, cols <= 32; add: += (else =).
  void (*tile)(int64_t kp, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc, int rows, int cols, bool add);
  // Called on a thread before its first tile and after its last (AMX: load and release the tile configuration).
  void (*begin)();
  void (*end)();
};

// The native kernel of a path, or null when this CPU cannot run it or this build has none: the kernels live in the
// AVX-512 plugin (libember_cpu_avx512.so, entry ember_cpu_bf16_kernel), opened here only on a CPU that runs them,
// whichever CPU variant is in use (Zen 4 runs the AVX2 variant and AVX512-BF16).
const Bf16Kernel* native_bf16_kernel(Bf16Path p);
inline constexpr const char* kBf16PluginEntryName = "ember_cpu_bf16_kernel";
inline constexpr int kBf16PluginVersion = 1;
using Bf16PluginEntry = const Bf16Kernel* (*)(int version, int path);

// Tests only: bf16_gemm and bf16_gemm_path() use k from now on (null: the native choice again), so that matmul's
// bf16 path runs, over an emulated kernel, on a CPU without the instructions. Not thread-safe against running GEMMs.
void set_bf16_kernel_for_testing(const Bf16Kernel* k);

// bf16_gemm through the given kernel (the tests pass an emulated one).
void bf16_gemm_with(const Bf16Kernel& k, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs, int64_t a_cs,
                    const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool accumulate, int threads);

}  // namespace ember::cpu
