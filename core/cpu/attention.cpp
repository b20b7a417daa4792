// defines: the CPU's scaled-dot-product attention, forward and backward, tiled as FlashAttention-2: queries in
// blocks of kRows, keys in blocks of kCols, an online softmax across the key blocks, so that the memory is a few
// blocks per thread whatever T is. The forward keeps each row's log-sum-exp; the backward recomputes the
// probabilities of a block from it. Block products are gemm_serial calls (our float32 kernel, Eigen for float64).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_backend.h"
#include "gemm.h"
#include "parallel.h"
#include "vec_math.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {
namespace {

constexpr int64_t kRows = 64, kCols = 64;

// Where head bh's row 0 is in a q/k/v of strides (batch, head, row).
int64_t head_offset(const int64_t* stride, const AttentionParams& p, int64_t bh) {
  return (bh / p.heads) * stride[0] + (bh % p.heads) * stride[1];
}

// The scores of one block after scaling: s[r, c] for query i0 + r and key j0 + c, with masked-out entries -inf.
template <class T>
struct ScoreMask {
  const AttentionParams& p;
  const void* mask;
  int64_t bh;

  // s (rows x cols, row stride kCols) *= scale, then the causal rule and the mask.
  void apply(T* s, int64_t i0, int64_t rows, int64_t j0, int64_t cols) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const int64_t b = bh / p.heads, h = bh % p.heads;
    const int64_t mbase = b * p.mask_stride[0] + h * p.mask_stride[1];
    for (int64_t r = 0; r < rows; ++r) {
      T* sr = s + r * kCols;
      const int64_t i = i0 + r;
      for (int64_t c = 0; c < cols; ++c) sr[c] *= static_cast<T>(p.scale);
      if (p.causal)
        for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < cols; ++c) sr[c] = kNegInf;
      if (p.mask == AttnMask::None) continue;
      const int64_t row = mbase + i * p.mask_stride[2];
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t at = row + (j0 + c) * p.mask_stride[3];
        if (p.mask == AttnMask::Bool) {
          if (!static_cast<const bool*>(mask)[at]) sr[c] = kNegInf;
        } else {
          sr[c] += static_cast<const T*>(mask)[at];
        }
      }
    }
  }
  // The key blocks a query block [i0, i0 + rows) sees: all, or under the causal rule those starting at or
  // before its last row.
  int64_t key_end(int64_t i0, int64_t rows) const { return p.causal ? std::min<int64_t>(p.tk, i0 + rows) : p.tk; }
};

// Under the causal rule the rows of a block whose keys in a key block all lie in its first 32 columns take
// products 32 columns wide instead of the block's 64: the diagonal block of a query block keeps rows 0-23 of 64
// at 32 keys (a fifth less product work there, an eighth of the whole for T = 128). The split falls at a multiple
// of 12 rows (the GEMM's tall tile) and at 32 columns (a whole sliver of B). The columns a narrow row skips are
// all masked out: outputs and gradients are the same bits (the products only lose terms that were 0 exactly).
struct RowGroup {
  int64_t r0, r1, cols;  // rows [r0, r1) of the block, the first `cols` keys of the key block
};
constexpr int64_t kNarrowCols = 32, kRowStep = 12;
int row_groups(const AttentionParams& p, int64_t i0, int64_t rows, int64_t j0, int64_t cols, RowGroup g[2]) {
  // row r sees keys up to i0 + r (top-left aligned): columns below i0 + r + 1 - j0 of this block
  const int64_t narrow = p.causal && cols > kNarrowCols ? std::min(rows, j0 + kNarrowCols - i0) : 0;
  const int64_t split = std::max<int64_t>(narrow, 0) / kRowStep * kRowStep;
  if (split == 0 || split == rows) {
    g[0] = {0, rows, cols};
    return 1;
  }
  g[0] = {0, split, kNarrowCols};
  g[1] = {split, rows, cols};
  return 2;
}

// s's rows [g.r0, g.r1) = the scores of queries i0 + g.r0 .. against the group's keys of block j0, scaled and
// masked (q and k point at the head's row 0; k read transposed through its strides).
template <class T>
void group_scores(const AttentionParams& p, const ScoreMask<T>& sm, const T* q, const T* k, int64_t i0, int64_t j0,
                  const RowGroup& g, T* s) {
  const int64_t qs = p.q_stride[2], ks = p.k_stride[2];
  gemm_serial(g.r1 - g.r0, g.cols, p.d, q + (i0 + g.r0) * qs, qs, 1, k + j0 * ks, 1, ks, s + g.r0 * kCols, kCols,
              false);
  sm.apply(s + g.r0 * kCols, i0 + g.r0, g.r1 - g.r0, j0, g.cols);
}

// One block of queries: O = softmax(Q K^T) V over every key block, with the running max m and sum l per row.
// q, k, v point at this head's row 0; their rows are p.q_stride[2] (...) elements apart.
template <class T>
void forward_block(const AttentionParams& p, const ScoreMask<T>& sm, const T* q, const T* k, const T* v, T* out,
                   T* lse, int64_t i0, int64_t rows, std::vector<T>& buf) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t dv = p.dv, vs = p.v_stride[2];
  // not zero-filled: each product writes s, the first key block's writes o, m and l are set here
  buf.resize(static_cast<size_t>(kRows * kCols + kRows * dv + 2 * kRows));
  T* s = buf.data();
  T* o = s + kRows * kCols;  // unnormalised output rows
  T* m = o + kRows * dv;
  T* l = m + kRows;
  std::fill(m, m + rows, kNegInf);
  std::fill(l, l + rows, T(0));
  const int64_t jend = sm.key_end(i0, rows);
  for (int64_t j0 = 0; j0 < jend; j0 += kCols) {
    const int64_t cols = std::min(kCols, p.tk - j0);
    const bool first = j0 == 0;  // o holds nothing yet: no rescaling, and the product is stored, not added
    RowGroup groups[2];
    const int ng = row_groups(p, i0, rows, j0, cols, groups);
    for (int gi = 0; gi < ng; ++gi) {
      const auto [r0, r1, gc] = groups[gi];
      group_scores(p, sm, q, k, i0, j0, groups[gi], s);
      for (int64_t r = r0; r < r1; ++r) {
        T* sr = s + r * kCols;
        const T mx = row_max(sr, gc, m[r]);
        if (mx == kNegInf) {  // every key so far masked out: this block adds nothing to the row
          for (int64_t c = 0; c < gc; ++c) sr[c] = 0;
          continue;
        }
        // rescale what the earlier blocks summed to the new max, then add this block's exps
        const T alpha = exp_of(m[r] - mx);
        l[r] = l[r] * alpha + exp_shifted_sum(sr, mx, gc);
        m[r] = mx;
        T* orow = o + r * dv;
        if (!first)
          for (int64_t c = 0; c < dv; ++c) orow[c] *= alpha;
      }
      gemm_serial(r1 - r0, dv, gc, s + r0 * kCols, kCols, 1, v + j0 * vs, vs, 1, o + r0 * dv, dv, !first);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const bool empty = l[r] == T(0);
    const T inv = empty ? T(0) : T(1) / l[r];
    T* dst = out + (i0 + r) * p.o_stride[2];
    for (int64_t c = 0; c < dv; ++c) dst[c] = o[r * dv + c] * inv;
    lse[i0 + r] = empty ? kNegInf : m[r] + std::log(l[r]);
  }
}

// The gradients of one (batch, head): for each key block, dK and dV summed over the query blocks, and dQ
// accumulated block by block (this task owns every row of its head, so no two threads write one row).
//   P = exp(S - lse), dV += P^T dO, dP = dO V^T, dS = P * (dP - D) * scale, dQ += dS K, dK += dS^T Q
// with D[i] = sum(dO[i] * O[i]) (= sum_j P dP, the softmax's backward).
template <class T>
void backward_head(const AttentionParams& p, const ScoreMask<T>& sm, const T* q, const T* k, const T* v,
                   const T* out, const T* lse, const T* gout, T* gq, T* gk, T* gv, std::vector<T>& buf) {
  const int64_t d = p.d, dv = p.dv, tq = p.tq, tk = p.tk, qs = p.q_stride[2], ks = p.k_stride[2], vs = p.v_stride[2];
  const int64_t os = p.o_stride[2], gos = p.go_stride[2], gqs = p.gq_stride[2], gks = p.gk_stride[2],
                gvs = p.gv_stride[2];
  auto zero_rows = [](T* x, int64_t rows, int64_t width, int64_t stride) {
    for (int64_t i = 0; i < rows; ++i) std::fill(x + i * stride, x + i * stride + width, T(0));
  };
  buf.resize(static_cast<size_t>(2 * kRows * kCols + tq));  // not zero-filled: the products write s and dp
  T* s = buf.data();
  T* dp = s + kRows * kCols;
  T* D = dp + kRows * kCols;
  for (int64_t i = 0; i < tq; ++i) D[i] = row_dot(gout + i * gos, out + i * os, dv);
  // dQ, dK and dV are stored by the first product that reaches them and added to by the rest; rows that none
  // reaches (keys past the last query under the causal rule) are zeroed. (tq, tk > 0: raw::attention_backward
  // fills the gradients of an empty attention itself.)
  for (int64_t j0 = 0; j0 < tk; j0 += kCols) {
    const int64_t cols = std::min(kCols, tk - j0);
    T* gkb = gk + j0 * gks;
    T* gvb = gv + j0 * gvs;
    // under the causal rule, query rows before j0 see none of these keys
    const int64_t first_i0 = p.causal ? j0 / kRows * kRows : 0;
    if (first_i0 >= tq) {
      zero_rows(gkb, cols, d, gks);
      zero_rows(gvb, cols, dv, gvs);
    }
    for (int64_t i0 = first_i0; i0 < tq; i0 += kRows) {
      const int64_t rows = std::min(kRows, tq - i0);
      const bool kv_acc = i0 != first_i0, q_acc = j0 != 0;
      // The products over rows (S, dP, dQ) go by row groups; those over the block's columns (dV, dK) take the
      // whole block, with P and dS zero in the columns a narrow group skips (as they are: all masked out).
      RowGroup groups[2];
      const int ng = row_groups(p, i0, rows, j0, cols, groups);
      for (int gi = 0; gi < ng; ++gi) {
        const auto [r0, r1, gc] = groups[gi];
        group_scores(p, sm, q, k, i0, j0, groups[gi], s);
        for (int64_t r = r0; r < r1; ++r) {
          T* sr = s + r * kCols;
          const T l = lse[i0 + r];
          if (l == -std::numeric_limits<T>::infinity()) {
            std::fill(sr, sr + gc, T(0));  // a fully masked row: output 0, no gradient
          } else {
            for (int64_t c = 0; c < gc; ++c) sr[c] = exp_nonpositive(sr[c] - l);
          }
          std::fill(sr + gc, sr + cols, T(0));
        }
      }
      // dV += P^T dO (P read transposed)
      gemm_serial(cols, dv, rows, s, 1, kCols, gout + i0 * gos, gos, 1, gvb, gvs, kv_acc);
      for (int gi = 0; gi < ng; ++gi) {
        const auto [r0, r1, gc] = groups[gi];
        // dP = dO V^T
        gemm_serial(r1 - r0, gc, dv, gout + (i0 + r0) * gos, gos, 1, v + j0 * vs, 1, vs, dp + r0 * kCols, kCols, false);
        for (int64_t r = r0; r < r1; ++r) {
          T* sr = s + r * kCols;
          const T* dpr = dp + r * kCols;
          const T Di = D[i0 + r];
          for (int64_t c = 0; c < gc; ++c) sr[c] = sr[c] * (dpr[c] - Di) * static_cast<T>(p.scale);
        }
        // dQ += dS K
        gemm_serial(r1 - r0, d, gc, s + r0 * kCols, kCols, 1, k + j0 * ks, ks, 1, gq + (i0 + r0) * gqs, gqs, q_acc);
      }
      // dK += dS^T Q
      gemm_serial(cols, d, rows, s, 1, kCols, q + i0 * qs, qs, 1, gkb, gks, kv_acc);
    }
  }
}

}  // namespace

void CpuBackend::attention(const AttentionArgs& a) {
  const Tensor &out = a.out, &lse = a.lse, &q = a.q, &k = a.k, &v = a.v, &mask = a.mask;
  const AttentionParams& p = a.p;
  if (p.batch_heads == 0 || p.tq == 0) return;
  visit_float("attention", q.dtype(), [&]<class T>() {
    const T *qp = static_cast<const T*>(q.data_ptr()), *kp = static_cast<const T*>(k.data_ptr()),
            *vp = static_cast<const T*>(v.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    T* lp = static_cast<T*>(lse.data_ptr());
    const void* mp = mask.defined() ? mask.data_ptr() : nullptr;
    const int64_t qblocks = (p.tq + kRows - 1) / kRows;
    // one task = one block of queries of one head
    parallel_for(0, p.batch_heads * qblocks, 1, [&](int64_t t0, int64_t t1) {
      std::vector<T> buf;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t bh = t / qblocks, i0 = (t % qblocks) * kRows;
        const ScoreMask<T> sm{p, mp, bh};
        forward_block<T>(p, sm, qp + head_offset(p.q_stride, p, bh), kp + head_offset(p.k_stride, p, bh),
                         vp + head_offset(p.v_stride, p, bh), op + head_offset(p.o_stride, p, bh), lp + bh * p.tq, i0,
                         std::min(kRows, p.tq - i0), buf);
      }
    });
  });
}

void CpuBackend::attention_backward(const AttentionGradArgs& a) {
  const Tensor &gq = a.gq, &gk = a.gk, &gv = a.gv, &gout = a.gout, &q = a.q, &k = a.k, &v = a.v, &out = a.out,
               &lse = a.lse, &mask = a.mask;
  const AttentionParams& p = a.p;
  visit_float("attention_backward", q.dtype(), [&]<class T>() {
    const auto at = [](const Tensor& t) { return static_cast<const T*>(t.data_ptr()); };
    const auto mut = [](const Tensor& t) { return static_cast<T*>(t.data_ptr()); };
    const void* mp = mask.defined() ? mask.data_ptr() : nullptr;
    parallel_for(0, p.batch_heads, 1, [&](int64_t b0, int64_t b1) {
      std::vector<T> buf;
      for (int64_t bh = b0; bh < b1; ++bh) {
        const ScoreMask<T> sm{p, mp, bh};
        const auto head = [&](const int64_t* stride) { return head_offset(stride, p, bh); };
        backward_head<T>(p, sm, at(q) + head(p.q_stride), at(k) + head(p.k_stride), at(v) + head(p.v_stride),
                         at(out) + head(p.o_stride), at(lse) + bh * p.tq, at(gout) + head(p.go_stride),
                         mut(gq) + head(p.gq_stride), mut(gk) + head(p.gk_stride), mut(gv) + head(p.gv_stride), buf);
      }
    });
  });
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS
