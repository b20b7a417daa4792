// defines: the CPU random fills: element i from Philox block (offset + i / 4), lane i % 4, through
// ember/internal/philox.h, the CUDA kernels' code, so both devices draw the same numbers from one generator state.
#include "cpu_backend.h"
#include "ember/internal/philox.h"
#include "parallel.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

void CpuBackend::random(RandomKind kind, const Tensor& out, double lo, double hi, PhiloxState st) {
  const int64_t n = out.numel();
  const int64_t blocks = (n + 3) / 4;
  visit_dtype(out.dtype(), [&]<class T>() {
    T* o = static_cast<T*>(out.data_ptr());
    // Element i comes from block (offset + i / 4), lane i % 4, whatever thread computes it.
    parallel_for(0, blocks, 2048, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        double v[4];
        scalar::random_block<T>(kind, st.seed, st.offset + static_cast<uint64_t>(blk), lo, hi, v);
        for (int j = 0; j < 4; ++j) {
          const int64_t i = blk * 4 + j;
          if (i < n) o[i] = convert<T>(v[j]);
        }
      }
    });
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
