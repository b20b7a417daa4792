// defines: the bf16 GEMM driver (bf16_gemm.h): the choice of path, the packing of A and B into bf16 pairs, the
// cache blocking and the threads around the micro-kernels of bf16_kernels.h. Compiled once, into libember, with
// the library's usual flags: only the kernels use AVX512-BF16 / AMX.
#include "bf16_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_backend.h"
#include "ember/internal/plugin_loader.h"
#include "parallel.h"

namespace ember::cpu {
namespace {

struct Choice {
  Bf16Path path = Bf16Path::None;
  const Bf16Kernel* kernel = nullptr;
};

// The path asked for by EMBER_BF16_GEMM, else the fastest that runs. "off" probes nothing: no plugin is opened and
// no AMX permission asked for (it is process-wide, and makes Linux refuse small signal stacks).
Choice choose() {
  auto usable = [](Bf16Path p) { return Choice{p, native_bf16_kernel(p)}; };  // kernel null: cannot run
  auto best = [&] {
    for (Bf16Path p : {Bf16Path::Amx, Bf16Path::Avx512Bf16})
      if (const Choice c = usable(p); c.kernel) return c;
    return Choice{};
  };
  const char* env = std::getenv("EMBER_BF16_GEMM");
  if (!env || !*env) return best();
  if (!std::strcmp(env, "off")) return {};
  const bool amx = !std::strcmp(env, "amx"), dot = !std::strcmp(env, "avx512bf16");
  if (!amx && !dot) {
    std::fprintf(stderr, "ember: EMBER_BF16_GEMM=%s is not off, avx512bf16 or amx; ignored\n", env);
    return best();
  }
  if (const Choice c = usable(amx ? Bf16Path::Amx : Bf16Path::Avx512Bf16); c.kernel) return c;
  const Choice c = best();
  std::fprintf(stderr, "ember: EMBER_BF16_GEMM=%s, but this CPU (or its OS, or this build) cannot run it; using %s\n",
               env, name(c.path));
  return c;
}

const Choice& choice() {
  static const Choice c = choose();
  return c;
}

// Calls f(begin, end) on at most `threads` contiguous chunks of [0, n), each at least `grain` long.
template <class F>
void split(int threads, int64_t n, int64_t grain, const F& f) {
  const int64_t chunks = std::min<int64_t>(std::max(threads, 1), (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t per = (n + chunks - 1) / chunks;
  run_chunks(threads, chunks, [&](int64_t c) {
    const int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) f(b, e);
  });
}

std::atomic<const Bf16Kernel*> g_test_kernel{nullptr};

uint32_t pair(uint16_t lo, uint16_t hi) { return lo | (static_cast<uint32_t>(hi) << 16); }

}  // namespace

const Bf16Kernel* native_bf16_kernel(Bf16Path p) {
  if (p == Bf16Path::None || !supports(p)) return nullptr;  // never open the AVX-512 plugin on a CPU without it
  // Only the plugin beside this libember (its own build's): another one on the search path may be stale.
  static const Bf16PluginEntry entry = [] {
    std::string tried, opened;
    const std::vector<std::string> all = detail::plugin_candidates("libember_cpu_avx512.so");
    return all.empty() ? nullptr
                       : reinterpret_cast<Bf16PluginEntry>(
                             detail::find_plugin_entry({all.front()}, kBf16PluginEntryName, &tried, &opened));
  }();
  return entry ? entry(kBf16PluginVersion, static_cast<int>(p)) : nullptr;
}

const char* name(Bf16Path p) { return p == Bf16Path::Amx ? "amx" : p == Bf16Path::Avx512Bf16 ? "avx512bf16" : "off"; }

Bf16Path bf16_gemm_path() {
  if (const Bf16Kernel* t = g_test_kernel.load(std::memory_order_relaxed)) return t->path;
  return choice().path;
}

void set_bf16_kernel_for_testing(const Bf16Kernel* k) { g_test_kernel.store(k, std::memory_order_relaxed); }

bool bf16_gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs, int64_t a_cs, const uint16_t* B,
               int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool accumulate, int threads) {
  const Bf16Kernel* t = g_test_kernel.load(std::memory_order_relaxed);
  const Bf16Kernel* k = t ? t : choice().kernel;  // (cached: no CPUID per call)
  if (!k) return false;
  bf16_gemm_with(*k, M, N, K, A, a_rs, a_cs, B, b_rs, b_cs, C, ldc, accumulate, threads);
  return true;
}

namespace {

// K in pairs, cut into slices of equal depth (as sgemm_slice_depth), each stored padded to the kernel's group.
struct Slices {
  int64_t K, P, count, kc, group;
  Slices(int64_t K_, int64_t group_) : K(K_), P((K_ + 1) / 2), group(group_) {
    count = (P + kBf16SlicePairs - 1) / kBf16SlicePairs;
    kc = (P + count - 1) / count;
  }
  int64_t depth(int64_t s) const { return std::min(kc, P - s * kc); }                 // real pairs of slice s
  int64_t padded(int64_t s) const { return (depth(s) + group - 1) / group * group; }  // stored pairs of slice s
};

// One full row of a B panel: d[n] = the pair (b[n * cs], b[rs + n * cs]) for the panel's 32 columns, in the two
// layouts the callers use, as loops the compiler vectorises: a row-major B (cs == 1: two rows zero-extended and
// interleaved) and a transposed one (rs == 1: each pair is two adjacent bf16, one 32-bit load on little-endian x86).
void pack_pairs(const uint16_t* b, int64_t rs, int64_t cs, uint32_t* d) {
  if (cs == 1) {
    const uint16_t* lo = b;
    const uint16_t* hi = b + rs;
    for (int64_t n = 0; n < kBf16NR; ++n) d[n] = pair(lo[n], hi[n]);
    return;
  }
  for (int64_t n = 0; n < kBf16NR; ++n) std::memcpy(d + n, b + n * cs, sizeof(uint32_t));
}

// B [K, N] into packed B (bf16_gemm.h) at Bp, slice s starting at b_at[s]; one (slice, panel) per task.
void pack_b(const Slices& sl, int64_t N, const uint16_t* B, int64_t b_rs, int64_t b_cs, const int64_t* b_at,
            uint32_t* Bp, int threads) {
  const int64_t panels = (N + kBf16NR - 1) / kBf16NR;
  auto at = [&](int64_t r, int64_t c) -> uint16_t { return r < sl.K ? B[r * b_rs + c * b_cs] : uint16_t{0}; };
  split(threads, sl.count * panels, std::max<int64_t>(1, 16384 / (sl.kc * kBf16NR)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = t / panels, j = t % panels, kp = sl.padded(s), real = sl.depth(s), n0 = j * kBf16NR;
      uint32_t* dst = Bp + b_at[s] + j * kp * kBf16NR;
      const bool full = n0 + kBf16NR <= N;
      for (int64_t p = 0; p < kp; ++p) {
        const int64_t r = 2 * (s * sl.kc + p);
        uint32_t* d = dst + p * kBf16NR;
        if (full && p < real && r + 1 < sl.K && (b_cs == 1 || b_rs == 1)) {  // no edge: the two common layouts
          pack_pairs(B + r * b_rs + n0 * b_cs, b_rs, b_cs, d);
          continue;
        }
        for (int64_t n = 0; n < kBf16NR; ++n) {
          const int64_t c = n0 + n;
          d[n] = p < real && c < N ? pair(at(r, c), at(r + 1, c)) : 0u;
        }
      }
    }
  });
}

// Slice s of the A panels [i0, i1) (mr rows each) into Ap, panel after panel (layout: bf16_gemm.h).
void pack_a(const Slices& sl, int64_t s, int64_t mr, int64_t M, int64_t i0, int64_t i1, const uint16_t* A, int64_t a_rs,
            int64_t a_cs, uint32_t* Ap) {
  const int64_t kp = sl.padded(s), real = sl.depth(s), g = sl.group;
  for (int64_t i = i0; i < i1; ++i) {
    uint32_t* ap = Ap + (i - i0) * mr * kp;
    for (int64_t r = 0; r < mr; ++r) {
      const int64_t row = i * mr + r;
      for (int64_t p0 = 0; p0 < kp; p0 += g) {  // pairs p0 .. p0 + g of row r
        uint32_t* dst = ap + p0 * mr + r * g;
        for (int64_t q = 0; q < g; ++q) {
          const int64_t p = p0 + q, c = 2 * (s * sl.kc + p);
          uint32_t v = 0;
          if (row < M && p < real) {
            const uint16_t* a = A + row * a_rs + c * a_cs;
            if (a_cs == 1 && c + 1 < sl.K) std::memcpy(&v, a, sizeof v);  // two adjacent bf16: one load
            else v = pair(a[0], c + 1 < sl.K ? a[a_cs] : uint16_t{0});
          }
          dst[q] = v;
        }
      }
    }
  }
}

}  // namespace

void bf16_gemm_with(const Bf16Kernel& k, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t a_rs, int64_t a_cs,
                    const uint16_t* B, int64_t b_rs, int64_t b_cs, float* C, int64_t ldc, bool accumulate,
                    int threads) {
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    return;
  }
  const Slices sl(K, k.group);
  const int64_t mr = k.mr, npad = (N + kBf16NR - 1) / kBf16NR * kBf16NR, panels = npad / kBf16NR;
  std::vector<int64_t> b_at(sl.count + 1, 0);  // where slice s starts in packed B
  for (int64_t s = 0; s < sl.count; ++s) b_at[s + 1] = b_at[s] + sl.padded(s) * npad;
  Scratch b_buf(sizeof(uint32_t) * static_cast<size_t>(b_at[sl.count]));  // read by every thread below
  pack_b(sl, N, B, b_rs, b_cs, b_at.data(), b_buf.as<uint32_t>(), threads);

  // Rows in panels of mr, split among the threads; each thread takes blocks of about 128 rows, packs their A for
  // one slice at a time and runs every 32-column panel of B over them (a B panel stays in L1 across the block).
  const int64_t row_panels = (M + mr - 1) / mr, block = std::max<int64_t>(1, 128 / mr);
  const int64_t flops_per_panel = mr * N * K;
  split(threads, row_panels, std::max<int64_t>(1, (int64_t{1} << 22) / std::max<int64_t>(flops_per_panel, 1)),
        [&](int64_t i_begin, int64_t i_end) {
          Scratch a_buf(sizeof(uint32_t) * static_cast<size_t>(block * mr * sl.padded(0)));
          uint32_t* Ap = a_buf.as<uint32_t>();
          k.begin();
          for (int64_t i0 = i_begin; i0 < i_end; i0 += block) {
            const int64_t i1 = std::min(i_end, i0 + block);
            for (int64_t s = 0; s < sl.count; ++s) {
              const int64_t kp = sl.padded(s);
              pack_a(sl, s, mr, M, i0, i1, A, a_rs, a_cs, Ap);
              for (int64_t j = 0; j < panels; ++j) {
                const uint32_t* bp = b_buf.as<uint32_t>() + b_at[s] + j * kp * kBf16NR;
                const int cols = static_cast<int>(std::min<int64_t>(kBf16NR, N - j * kBf16NR));
                for (int64_t i = i0; i < i1; ++i) {
                  const int rows = static_cast<int>(std::min<int64_t>(mr, M - i * mr));
                  k.tile(kp, Ap + (i - i0) * mr * kp, bp, C + i * mr * ldc + j * kBf16NR, ldc, rows, cols,
                         accumulate || s > 0);
                }
              }
            }
          }
          k.end();
        });
}

}  // namespace ember::cpu
