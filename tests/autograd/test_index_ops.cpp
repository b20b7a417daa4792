// Tests the index, sort and shape ops of issue 17 beyond their gradcheck rows (tests/support/op_cases.h): gather,
// scatter_add, masked_fill, sort, argsort, topk, chunk, split and pad — values against numbers computed with
// PyTorch 1.13 (torch.gather, torch.sort(stable=True), F.pad, ... on the same inputs, pasted here as literals),
// where their gradients go, and every bad input, each an ember::Error naming the op and the shapes or dtypes.
// einsum and adaptive_avg_pool2d: test_einsum_pool.cpp.
#include <cmath>
#include <limits>
#include <vector>

#include "test_util.h"

using namespace ember;
using test::values;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const TensorOptions f64{.dtype = kFloat64};
std::vector<double> V(std::initializer_list<double> v) { return v; }
std::vector<int64_t> I(std::initializer_list<int64_t> v) { return v; }
Tensor idx(const std::vector<int64_t>& v, const Shape& s) { return tensor<int64_t>(v, s); }

// d sum(f(x) * w) / dx for a fixed weighting w of f's output (w = 1 when undefined).
Tensor grad_of(const Tensor& x, const std::function<Tensor(const Tensor&)>& f, const Tensor& w = {}) {
  Tensor leaf = x.detach().requires_grad_(true);
  Tensor y = f(leaf);
  sum(w.defined() ? y * w : y).backward();
  return leaf.grad();
}

// --- gather / scatter_add

TEST(Gather, ValuesMatchTorch) {
  const Tensor x = arange(12, f64).reshape({3, 4}) * 0.5 - 1.0;
  // torch 1.13: torch.gather(x, 1, [[3, 0], [1, 1], [2, 0]]) and torch.gather(x, 0, [[2, 0, 1]])
  EXPECT_TENSOR_NEAR(gather(x, 1, idx({3, 0, 1, 1, 2, 0}, {3, 2})), Shape({3, 2}), V({0.5, -1, 1.5, 1.5, 4, 3}), 0, 0);
  EXPECT_TENSOR_NEAR(gather(x, 0, idx({2, 0, 1}, {1, 3})), Shape({1, 3}), V({3, -0.5, 2}), 0, 0);
  // torch 1.13: torch.gather(arange(24.).reshape(2, 3, 4), -2, i3)
  const Tensor x3 = arange(24, f64).reshape({2, 3, 4});
  const Tensor i3 = idx({2, 1, 0, 2, 0, 1, 2, 2, 1, 0, 2, 1, 0, 0, 1, 2}, {2, 2, 4});
  EXPECT_TENSOR_NEAR(gather(x3, -2, i3), Shape({2, 2, 4}),
                     V({8, 5, 2, 11, 0, 5, 10, 11, 16, 13, 22, 19, 12, 13, 18, 23}), 0, 0);
  // integer inputs, the method, a 0-dim input, an empty index
  EXPECT_EQ(gather(x3.to(kInt32), 2, idx({3, 0}, {1, 1, 2})).to_vector<int32_t>(), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(x.gather(1, idx({0, 1, 2}, {3, 1})).to_vector<double>(), V({-1, 1.5, 4}));
  EXPECT_EQ(gather(full({}, 5.0, f64), 0, idx({0}, {})).item<double>(), 5.0);
  EXPECT_EQ(gather(x, 1, zeros({3, 0}, {.dtype = kInt64})).shape(), Shape({3, 0}));
}

TEST(Gather, GradientAddsUpAtRepeatedIndices) {
  const Tensor x = randn({2, 3}, f64);
  EXPECT_EQ(values(grad_of(x,
                           [](const Tensor& t) {
                             return gather(t, 1, idx({0, 0, 2, 1, 1, 1}, {2, 3}));
                           })),
            V({2, 0, 1, 0, 3, 0}));
}

TEST(ScatterAdd, ValuesMatchTorch) {
  const Tensor x = arange(15, f64).reshape({3, 5}) / 10.0;
  const Tensor src = arange(12, f64).reshape({3, 4}) + 1.0;  // larger than the index: its corner is used
  // torch 1.13: torch.scatter_add(x, 1, [[0, 1, 0], [4, 4, 2]], src) and torch.scatter_add(x, 0, [[2, 0, 2, 1]], src)
  EXPECT_TENSOR_NEAR(scatter_add(x, 1, idx({0, 1, 0, 4, 4, 2}, {2, 3}), src), Shape({3, 5}),
                     V({4.0, 2.1, 0.2, 0.3, 0.4, 0.5, 0.6, 7.7, 0.8, 11.9, 1.0, 1.1, 1.2, 1.3, 1.4}), 1e-15, 0);
  EXPECT_TENSOR_NEAR(scatter_add(x, 0, idx({2, 0, 2, 1}, {1, 4}), src), Shape({3, 5}),
                     V({0.0, 2.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 4.8, 0.9, 2.0, 1.1, 4.2, 1.3, 1.4}), 1e-15, 0);
  // integers, the method, 0-dim
  EXPECT_EQ(scatter_add(zeros({5}, {.dtype = kInt64}), 0, idx({0, 0, 3}, {3}), tensor<int64_t>({1, 2, 3}))
                .to_vector<int64_t>(),
            I({3, 0, 0, 3, 0}));
  EXPECT_EQ(x.scatter_add(0, idx({1}, {1, 1}), src).to_vector<double>()[5], 0.5 + 1.0);
  EXPECT_EQ(scatter_add(full({}, 1.0, f64), 0, idx({0}, {}), full({}, 2.0, f64)).item<double>(), 3.0);
}

TEST(ScatterAdd, IsTheAdjointOfGatherAndSendsGradientsToXAndSrc) {
  // <gather(x, d, i), y> = <x, scatter_add(0, d, i, y)> for every x and y
  manual_seed(3);
  const Tensor i = randint(0, 4, {3, 5, 2});
  for (int64_t d : {0, 1, 2}) {
    const Tensor x = randn({4, 5, 4}, f64), y = randn({3, 5, 2}, f64);
    const double lhs = sum(gather(x, d, i) * y).item();
    const double rhs = sum(x * scatter_add(zeros_like(x), d, i, y)).item();
    EXPECT_NEAR(lhs, rhs, 1e-12) << "dim " << d;
  }
  // d/dx = 1 everywhere; d/dsrc = 1 where index covers src, 0 in the rest of a larger src
  const Tensor x = randn({3, 5}, f64).requires_grad_(), src = randn({3, 4}, f64).requires_grad_();
  sum(scatter_add(x, 1, idx({0, 1, 0, 4, 4, 2}, {2, 3}), src)).backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(15, 1.0));
  EXPECT_EQ(values(src.grad()), V({1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0}));
}

// --- masked_fill

TEST(MaskedFill, ValuesMatchTorch) {
  const Tensor x = arange(6, f64).reshape({2, 3});
  const Tensor m = tensor<bool>({true, false, true});
  // torch 1.13: x.masked_fill(m, -1.5); arange(3.).masked_fill([[True], [False]], 7.) (broadcast to [2, 3]);
  // arange(3).masked_fill(m, 2.7) (the value converted to int64: 2)
  EXPECT_TENSOR_NEAR(masked_fill(x, m, -1.5), Shape({2, 3}), V({-1.5, 1, -1.5, -1.5, 4, -1.5}), 0, 0);
  EXPECT_TENSOR_NEAR(masked_fill(arange(3, f64), tensor<bool>({true, false}, {2, 1}), 7.0), Shape({2, 3}),
                     V({7, 7, 7, 0, 1, 2}), 0, 0);
  const Tensor xi = masked_fill(arange(3), m, 2.7);
  EXPECT_EQ(xi.dtype(), kInt64);
  EXPECT_EQ(xi.to_vector<int64_t>(), I({2, 1, 2}));
  EXPECT_EQ(x.masked_fill(m, 0).to_vector<double>(), V({0, 1, 0, 0, 4, 0}));
}

TEST(MaskedFill, GradientsOfXAndATensorValue) {
  const Tensor m = tensor<bool>({true, false, true});
  const Tensor x = randn({2, 3}, f64).requires_grad_(), v = full({}, 0.5, f64).requires_grad_();
  sum(masked_fill(x, m, v) * 3.0).backward();
  EXPECT_EQ(values(x.grad()), V({0, 3, 0, 0, 3, 0}));  // zero where filled
  EXPECT_EQ(v.grad().item<double>(), 12.0);            // 4 filled elements
}

// --- sort / argsort / topk

TEST(Sort, ValuesAndIndicesMatchTorchStable) {
  const Tensor x = tensor<double>({3, kNaN, 1, kNaN, -kInf, 2, 2, -0.0, 0.0, 1}, {2, 5});
  // torch 1.13: torch.sort(x, dim, descending, stable=True) (NaN largest, ties in their order)
  SortResult a = sort(x, 1);
  EXPECT_TENSOR_NEAR(a.values, Shape({2, 5}), V({-kInf, 1, 3, kNaN, kNaN, -0.0, 0, 1, 2, 2}), 0, 0);
  EXPECT_EQ(a.indices.to_vector<int64_t>(), I({4, 2, 0, 1, 3, 2, 3, 4, 0, 1}));
  auto [dv, di] = sort(x, -1, true);
  EXPECT_TENSOR_NEAR(dv, Shape({2, 5}), V({kNaN, kNaN, 3, 1, -kInf, 2, 2, 1, -0.0, 0}), 0, 0);
  EXPECT_EQ(di.to_vector<int64_t>(), I({1, 3, 0, 2, 4, 0, 1, 4, 2, 3}));
  SortResult c = x.sort(0);
  EXPECT_TENSOR_NEAR(c.values, Shape({2, 5}), V({2, 2, -0.0, 0, -kInf, 3, kNaN, 1, kNaN, 1}), 0, 0);
  EXPECT_EQ(c.indices.to_vector<int64_t>(), I({1, 1, 1, 1, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(argsort(x, 1).to_vector<int64_t>(), a.indices.to_vector<int64_t>());
  // integers keep their dtype; a 0-dim tensor is its own sort
  EXPECT_EQ(sort(tensor<int32_t>({1, 2, 1, 2, 1}), 0, true).values.to_vector<int32_t>(),
            (std::vector<int32_t>{2, 2, 1, 1, 1}));
  SortResult s = sort(full({}, 4.0, f64));
  EXPECT_EQ(s.values.item<double>(), 4.0);
  EXPECT_EQ(s.indices.item<int64_t>(), 0);
}

TEST(Sort, GradientGoesBackToWhereEachValueCameFrom) {
  const Tensor x = tensor<double>({0.3, -1.0, 2.0, 0.1});
  const Tensor w = tensor<double>({1, 2, 3, 4});  // weights of the sorted positions
  // sorted: -1.0 (x[1]), 0.1 (x[3]), 0.3 (x[0]), 2.0 (x[2])
  EXPECT_EQ(values(grad_of(
                x, [](const Tensor& t) { return sort(t).values; }, w)),
            V({3, 1, 4, 2}));
  EXPECT_EQ(values(grad_of(
                x, [](const Tensor& t) { return topk(t, 2).values; }, w.slice(0, 0, 2))),
            V({2, 0, 1, 0}));
}

TEST(Topk, ValuesAndIndicesMatchTorch) {
  const Tensor x = tensor<double>({1, 5, 2, 4, 3, 0, -1, 7, 6, 8}, {2, 5});
  // torch 1.13: torch.topk(x, 3); torch.topk(x, 2, dim=0, largest=False); torch.topk(x, 2, largest=False)
  SortResult a = topk(x, 3);
  EXPECT_EQ(values(a.values), V({5, 4, 3, 8, 7, 6}));
  EXPECT_EQ(a.indices.to_vector<int64_t>(), I({1, 3, 4, 4, 2, 3}));
  SortResult b = topk(x, 2, 0, false);
  EXPECT_EQ(values(b.values), V({0, -1, 2, 4, 3, 1, 5, 7, 6, 8}));
  EXPECT_EQ(b.indices.to_vector<int64_t>(), I({1, 1, 0, 0, 0, 0, 0, 1, 1, 1}));
  SortResult c = x.topk(2, -1, false);
  EXPECT_EQ(values(c.values), V({1, 2, -1, 0}));
  EXPECT_EQ(c.indices.to_vector<int64_t>(), I({0, 2, 1, 0}));
  // Ties: the earlier element first (documented; PyTorch leaves their order unspecified).
  EXPECT_EQ(topk(tensor<double>({1, 3, 3, 2, 3}), 2).indices.to_vector<int64_t>(), I({1, 2}));
  // k = 0 and k = size; a 0-dim tensor is its own top 1 (and, as PyTorch's, its own top 0)
  EXPECT_EQ(topk(x, 0).values.shape(), Shape({2, 0}));
  EXPECT_EQ(topk(x, 5).indices.to_vector<int64_t>(), sort(x, 1, true).indices.to_vector<int64_t>());
  EXPECT_EQ(topk(full({}, 2.0, f64), 1).values.item<double>(), 2.0);
  EXPECT_EQ(topk(full({}, 2.0, f64), 0).indices.item<int64_t>(), 0);
}

// --- chunk / split

std::vector<Shape> shapes(const std::vector<Tensor>& ts) {
  std::vector<Shape> s;
  for (const Tensor& t : ts) s.push_back(t.shape());
  return s;
}

TEST(ChunkSplit, PiecesMatchTorchAndAreViews) {
  const Tensor x = arange(10, f64).reshape({5, 2});
  // torch 1.13: chunk(arange(5), 3) -> sizes 2, 2, 1; chunk(arange(6), 4) -> 2, 2, 2 (three pieces);
  // chunk(zeros(0), 3) -> three empty pieces; split(arange(5), 2) -> 2, 2, 1; split(arange(5), 7) -> one piece;
  // split(zeros(0), 0) -> one empty piece
  std::vector<Tensor> c = chunk(x, 3);
  EXPECT_EQ(shapes(c), (std::vector<Shape>{{2, 2}, {2, 2}, {1, 2}}));
  EXPECT_EQ(values(c[1]), V({4, 5, 6, 7}));
  EXPECT_EQ(c[2].impl()->storage, x.impl()->storage);  // views of x
  EXPECT_EQ(shapes(chunk(arange(6), 4)), (std::vector<Shape>{{2}, {2}, {2}}));
  EXPECT_EQ(shapes(chunk(zeros({0}), 3)), (std::vector<Shape>{{0}, {0}, {0}}));
  EXPECT_EQ(shapes(x.chunk(2, 1)), (std::vector<Shape>{{5, 1}, {5, 1}}));
  EXPECT_EQ(shapes(split(arange(5), 2)), (std::vector<Shape>{{2}, {2}, {1}}));
  EXPECT_EQ(shapes(split(arange(5), 7)), (std::vector<Shape>{{5}}));
  EXPECT_EQ(shapes(split(zeros({0}), 0)), (std::vector<Shape>{{0}}));
  const std::vector<Tensor> s = x.split({1, 0, 4}, 0);
  EXPECT_EQ(shapes(s), (std::vector<Shape>{{1, 2}, {0, 2}, {4, 2}}));
  EXPECT_EQ(values(s[2]), V({2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(shapes(split(x, std::vector<int64_t>{2}, 1)), (std::vector<Shape>{{5, 2}}));
  EXPECT_EQ(shapes(x.split(1, -1)), (std::vector<Shape>{{5, 1}, {5, 1}}));
  // a piece's gradient is its part of x
  EXPECT_EQ(values(grad_of(x, [](const Tensor& t) { return chunk(t, 3)[1]; })), V({0, 0, 0, 0, 1, 1, 1, 1, 0, 0}));
}

// split is one recorded op: its backward puts the pieces' gradients side by side. When they already lie so in one
// buffer (attention's gradients of a packed q, k, v projection), that buffer is the gradient, not a copy; pieces
// elsewhere, in another order or with one missing are copied (zeros for the missing one).
TEST(ChunkSplit, BackwardJoinsThePiecesGradientsWithoutACopyWhenSideBySide) {
  const Tensor x = randn({3, 7}, f64).requires_grad_();
  const std::vector<Tensor> p = split(x, std::vector<int64_t>{2, 4, 1}, 1);
  EXPECT_EQ(p[0].grad_fn_name(), "split");
  const Tensor buf = randn({3, 7}, f64);
  const std::vector<Tensor> side_by_side = split(buf, std::vector<int64_t>{2, 4, 1}, 1);
  const Tensor g = autograd::grad(p, {x}, side_by_side, /*retain_graph=*/true)[0];
  EXPECT_EQ(values(g), values(buf));
  EXPECT_EQ(g.impl()->storage, buf.impl()->storage);  // the buffer itself
  EXPECT_EQ(g.storage_offset(), buf.storage_offset());
  EXPECT_TRUE(g.is_contiguous());

  // the same values from separate buffers, and from one buffer in another order: copies with the same values
  std::vector<Tensor> separate;
  for (const Tensor& t : side_by_side) separate.push_back(t.clone());
  const Tensor g2 = autograd::grad(p, {x}, separate, /*retain_graph=*/true)[0];
  EXPECT_EQ(values(g2), values(buf));
  EXPECT_NE(g2.impl()->storage, buf.impl()->storage);
  const Tensor other = randn({3, 7}, f64);  // pieces 1 | 0 | 2 laid out as 4 | 2 | 1 columns
  const std::vector<Tensor> q = split(other, std::vector<int64_t>{4, 2, 1}, 1);
  const Tensor g3 = autograd::grad(p, {x}, {q[1], q[0], q[2]}, /*retain_graph=*/true)[0];
  EXPECT_EQ(values(g3), values(cat({q[1], q[0], q[2]}, 1)));
  EXPECT_NE(g3.impl()->storage, other.impl()->storage);

  // a piece without a gradient: zeros in its place
  const Tensor g4 = autograd::grad({sum(p[0] * 2.0) + sum(p[2])}, {x})[0];
  std::vector<double> want(21, 0.0);
  for (int r = 0; r < 3; ++r) {
    want[static_cast<size_t>(7 * r)] = want[static_cast<size_t>(7 * r + 1)] = 2.0;
    want[static_cast<size_t>(7 * r + 6)] = 1.0;
  }
  EXPECT_EQ(values(g4), want);
}

// --- pad

TEST(Pad, ValuesMatchTorch) {
  const Tensor x = arange(6, f64).reshape({2, 3});
  // torch 1.13: F.pad(x, (1, 2)); F.pad(x, (1, -1, -1, 2), value=9.5); F.pad(x[None], (0, 0, 1, 0, 2, 1), value=-2.);
  // F.pad(x, (-1, -1))
  EXPECT_TENSOR_NEAR(pad(x, {1, 2}), Shape({2, 6}), V({0, 0, 1, 2, 0, 0, 0, 3, 4, 5, 0, 0}), 0, 0);
  EXPECT_TENSOR_NEAR(pad(x, {1, -1, -1, 2}, 9.5), Shape({3, 3}), V({9.5, 3, 4, 9.5, 9.5, 9.5, 9.5, 9.5, 9.5}), 0, 0);
  std::vector<double> ref(36, -2.0);
  for (int k = 0; k < 6; ++k) ref[static_cast<size_t>(21 + k)] = k;  // x lands in block 2, rows 1-2
  EXPECT_TENSOR_NEAR(pad(x.reshape({1, 2, 3}), {0, 0, 1, 0, 2, 1}, -2.0), Shape({4, 3, 3}), ref, 0, 0);
  EXPECT_TENSOR_NEAR(pad(x, {-1, -1}), Shape({2, 1}), V({1, 4}), 0, 0);
  // everything cropped, integers, no pads at all (a copy, not x itself), a 0-dim tensor
  EXPECT_EQ(pad(arange(3, f64), {-2, -1}).shape(), Shape({0}));
  EXPECT_EQ(pad(arange(3), {1, 0}, 7).to_vector<int64_t>(), I({7, 0, 1, 2}));
  const Tensor same = pad(x, {});
  EXPECT_EQ(values(same), values(x));
  EXPECT_NE(same.impl()->storage, x.impl()->storage);
  EXPECT_EQ(pad(full({}, 3.0, f64), {}).item<double>(), 3.0);
}

TEST(Pad, GradientIsThePaddedRegionAndZeroWhereCropped) {
  const Tensor x = randn({2, 3}, f64);
  // pads (1, -1) on the columns keep x's columns 0-1, (-1, 2) on the rows keep row 1
  EXPECT_EQ(values(grad_of(x, [](const Tensor& t) { return pad(t, {1, -1, -1, 2}, 9.5); })), V({0, 0, 0, 1, 1, 0}));
}

// --- bad inputs

TEST(IndexOps, BadInputsNameTheOpAndTheShapes) {
  const Tensor x = randn({3, 4});
  const Tensor i = idx({0, 1, 2}, {3, 1});
  EXPECT_THROW_MSG(gather(x, 1, i.to(kInt32)), DTypeError, "gather", "int64", "int32", "[3, 1]");
  EXPECT_THROW_MSG(gather(x, 1, idx({0, 4, 1}, {3, 1})), IndexError, "gather", "index 4", "dim 1 with size 4",
                   "[3, 4]");
  EXPECT_THROW_MSG(gather(x, 0, idx({-1, 0, 0}, {3, 1})), IndexError, "gather", "index -1");
  EXPECT_THROW_MSG(gather(x, 2, i), IndexError, "gather", "dim 2");
  EXPECT_THROW_MSG(gather(x, 0, idx({0, 1, 2}, {3})), ShapeError, "gather", "[3]", "float32[3, 4]");
  EXPECT_THROW_MSG(gather(x, 1, idx({0, 0, 0, 0}, {4, 1})), ShapeError, "gather", "[4, 1]", "[3, 4]", "dim 0");
  EXPECT_THROW_MSG(gather(Tensor(), 0, i), Error, "gather", "undefined");
  EXPECT_THROW_MSG(scatter_add(x, 1, i, randn({3, 1}, f64)), DTypeError, "scatter_add", "float64", "float32");
  EXPECT_THROW_MSG(scatter_add(x, 1, idx({0, 1, 2, 3}, {2, 2}), randn({2, 1})), ShapeError, "scatter_add", "[2, 2]",
                   "src [2, 1]");
  EXPECT_THROW_MSG(scatter_add(x, 1, idx({0, 9, 2}, {3, 1}), randn({3, 1})), IndexError, "scatter_add", "index 9");
  EXPECT_THROW_MSG(scatter_add(x, 1, i, randn({3})), ShapeError, "scatter_add", "src [3]", "[3, 1]");
  EXPECT_THROW_MSG(masked_fill(x, ones({3, 4}), 0.0), DTypeError, "masked_fill", "bool", "float32");
  EXPECT_THROW_MSG(masked_fill(x, tensor<bool>({true, false}), 0.0), ShapeError, "masked_fill", "[3, 4]", "[2]");
  EXPECT_THROW_MSG(masked_fill(x, gt(x, 0.0), zeros({1})), ShapeError, "masked_fill", "0-dim", "[1]");
  EXPECT_THROW_MSG(sort(x, 2), IndexError, "sort", "dim 2");
  EXPECT_THROW_MSG(topk(x, 5), IndexError, "topk", "k = 5", "size 4", "[3, 4]");
  EXPECT_THROW_MSG(topk(x, -1, 0), IndexError, "topk", "k = -1");
  EXPECT_THROW_MSG(topk(x, 1, -3), IndexError, "topk", "-3");
  EXPECT_THROW_MSG(chunk(x, 0), ValueError, "chunk", "positive", "0");
  EXPECT_THROW_MSG(chunk(full({}, 1.0), 2), ShapeError, "chunk", "0-dim");
  EXPECT_THROW_MSG(split(x, 0, 1), ValueError, "split", "split_size", "[3, 4]");
  EXPECT_THROW_MSG(split(x, std::vector<int64_t>{2, 4}, 1), ValueError, "split", "[2, 4]", "6", "[3, 4]", "size 4");
  EXPECT_THROW_MSG(split(x, std::vector<int64_t>{5, -1}, 1), ValueError, "split", "non-negative", "[5, -1]");
  EXPECT_THROW_MSG(split(x, 2, 5), IndexError, "split", "dim 5");
  EXPECT_THROW_MSG(pad(x, {1, 2, 3}), ValueError, "pad", "pairs", "[1, 2, 3]");
  EXPECT_THROW_MSG(pad(x, {1, 1, 1, 1, 1, 1}), ValueError, "pad", "3 dims", "[3, 4]");
  EXPECT_THROW_MSG(pad(x, {-3, -2}), ValueError, "pad", "(-3, -2)", "4 elements", "dim 1", "[3, 4]");
  int64_t buf[3] = {};
  const Tensor gi = test::host_memory_claiming_cuda(buf, {3, 1});
  if (!gi.defined()) return;
  EXPECT_THROW_MSG(gather(x, 1, gi), DeviceError, "gather", "cpu", "cuda:0");
}

}  // namespace
