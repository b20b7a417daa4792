// The autograd engine: accumulation, fan-in/fan-out, retain_graph, grad mode, detach, graph lifetime,
// in-place misuse, autograd::grad, checkpointing (same gradients, less memory) and anomaly mode.
#include <cmath>
#include <map>
#include <string>

#include "test_util.h"

using namespace ember;

namespace {
Tensor f64(const Shape& s) { return randn(s, {.dtype = kFloat64}); }
}  // namespace

TEST(Engine, GradientOfAScalarAndAccumulation) {
  manual_seed(1);
  Tensor x = f64({3}).requires_grad_();
  Tensor y = sum(x * x);  // dy/dx = 2x
  y.backward();
  std::vector<double> xv = test::values(x), expect;
  for (double v : xv) expect.push_back(2 * v);
  EXPECT_TENSOR_NEAR(x.grad(), Shape({3}), expect, 1e-12);
  sum(x * 3).backward();  // accumulates: 2x + 3
  for (double& v : expect) v += 3;
  EXPECT_TENSOR_NEAR(x.grad(), Shape({3}), expect, 1e-12);
  x.set_grad({});
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, FanOutAndFanIn) {
  Tensor x = tensor<double>({2.0}).requires_grad_();
  Tensor a = x * x, b = exp(x);  // x fans out to two branches
  Tensor y = a * b + a;          // ... that meet again
  y.backward(ones({1}, {.dtype = kFloat64}));
  const double v = 2.0;  // d/dx [x^2 e^x + x^2] = 2x e^x + x^2 e^x + 2x
  EXPECT_NEAR(x.grad().item(), 2 * v * std::exp(v) + v * v * std::exp(v) + 2 * v, 1e-10);
  EXPECT_EQ(y.grad_fn_name(), "add");
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(x.is_leaf());
}

TEST(Engine, BackwardNeedsAScalarOrAGradient) {
  Tensor x = f64({2, 2}).requires_grad_();
  Tensor y = x * 2;
  EXPECT_THROW_MSG(y.backward(), ShapeError, "one-element");
  EXPECT_THROW_MSG(y.backward(ones({3}, {.dtype = kFloat64})), ShapeError, "[3]", "[2, 2]");
  Tensor plain = f64({1});
  EXPECT_THROW_MSG(plain.backward(), Error, "does not require grad");
}

TEST(Engine, SecondBackwardNeedsRetainGraph) {
  Tensor x = f64({3}).requires_grad_();
  Tensor y = sum(exp(x));
  y.backward({}, /*retain_graph=*/true);
  Tensor g1 = x.grad().clone();
  y.backward();  // allowed: the graph was retained
  EXPECT_TENSOR_NEAR(x.grad(), Shape({3}), test::values(g1 * 2), 1e-12);
  EXPECT_THROW_MSG(y.backward(), Error, "second time", "retain_graph");
}

TEST(Engine, NoGradAndDetach) {
  Tensor x = f64({2}).requires_grad_();
  {
    NoGradGuard g;
    EXPECT_FALSE(GradMode::is_enabled());
    Tensor y = x * 2;
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), x.data_ptr());  // shares memory
  Tensor y = sum(x * d);                  // gradient flows only through the non-detached factor
  y.backward();
  EXPECT_TENSOR_NEAR(x.grad(), Shape({2}), test::values(d), 1e-12);
  EXPECT_THROW_MSG(zeros({2}, {.dtype = kInt64}).requires_grad_(), DTypeError, "floating");
  EXPECT_THROW_MSG((x * 2).requires_grad_(false), Error, "leaf");
}

TEST(Engine, GraphIsFreedWhenOutputsDie) {
  const int64_t before = autograd::Node::live.load();
  {
    Tensor x = f64({4}).requires_grad_();
    Tensor y = x;
    for (int i = 0; i < 50; ++i) y = tanh(y) * 1.5;
    EXPECT_GE(autograd::Node::live.load(), before + 100);
  }
  EXPECT_EQ(autograd::Node::live.load(), before);
  {  // saving an op's own output (exp, tanh) must not keep its node alive in a cycle
    Tensor x = f64({4}).requires_grad_();
    Tensor y = exp(tanh(x));
    sum(y).backward();
  }
  EXPECT_EQ(autograd::Node::live.load(), before);
}

TEST(Engine, InPlaceChangeOfASavedTensorIsDetected) {
  Tensor x = f64({3}).requires_grad_();
  Tensor h = x * 1.0;  // non-leaf
  Tensor y = exp(h);   // saves its output
  y.mul_(2);           // modifies what exp saved
  EXPECT_THROW_MSG(sum(y).backward(), Error, "exp", "modified by an in-place operation");
  Tensor a = x * 1.0;
  Tensor b = a * a;  // saves a
  a.add_(1);
  EXPECT_THROW_MSG(sum(b).backward(), Error, "mul", "in-place");
}

TEST(Engine, InPlaceRules) {
  Tensor w = f64({3}).requires_grad_();
  EXPECT_THROW_MSG(w.add_(1), Error, "add_", "leaf");
  {
    NoGradGuard g;  // an optimiser update
    Tensor before = w.clone();
    w.sub_(before * 0.5);
    EXPECT_TENSOR_NEAR(w, Shape({3}), test::values(before * 0.5), 1e-12);
  }
  // recorded in-place ops on non-leaves give the right gradient
  Tensor x = tensor<double>({1.0, -2.0, 3.0}).requires_grad_();
  Tensor h = x * 2;
  h.mul_(x);  // h = 2 x^2
  h.add_(x);  // h = 2 x^2 + x
  h.relu_();
  sum(h).backward();
  std::vector<double> expect;
  for (double v : {1.0, -2.0, 3.0}) expect.push_back(2 * v * v + v > 0 ? 4 * v + 1 : 0.0);
  EXPECT_TENSOR_NEAR(x.grad(), Shape({3}), expect, 1e-12);
  Tensor v = (x * 1.0).slice(0, 0, 2);
  EXPECT_THROW_MSG(v.mul_(2), Error, "view");
}

TEST(Engine, AutogradGradDoesNotTouchDotGrad) {
  Tensor x = f64({3}).requires_grad_(), w = f64({3}).requires_grad_();
  Tensor y = sum(x * w);
  std::vector<Tensor> g = autograd::grad({y}, {x, w});
  EXPECT_TENSOR_NEAR(g[0], Shape({3}), test::values(w), 1e-12);
  EXPECT_TENSOR_NEAR(g[1], Shape({3}), test::values(x), 1e-12);
  EXPECT_FALSE(x.grad().defined());
  Tensor h = x * 2;  // a non-leaf input
  Tensor z = sum(h * h);
  std::vector<Tensor> gh = autograd::grad({z}, {h});
  EXPECT_TENSOR_NEAR(gh[0], Shape({3}), test::values(h * 2), 1e-12);
  Tensor unused = f64({2}).requires_grad_();
  EXPECT_THROW_MSG(autograd::grad({sum(x * 1.0)}, {unused}), Error, "not used");
  EXPECT_FALSE(autograd::grad({sum(x * 1.0)}, {unused}, {}, false, true)[0].defined());
}

TEST(Engine, DeepChainNeedsNoRecursion) {
  Tensor x = tensor<double>({0.5}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = y * 1.0;
  y.backward();
  EXPECT_NEAR(x.grad().item(), 1.0, 1e-12);
}

TEST(Checkpoint, SameGradientsAsThePlainRun) {
  manual_seed(3);
  Tensor x = f64({4, 6}).requires_grad_(), w = f64({6, 6}).requires_grad_();
  auto block = [&](const std::vector<Tensor>& in) { return tanh(matmul(tanh(matmul(in[0], in[1])), in[1])); };
  sum(block({x, w})).backward();
  Tensor gx = x.grad().clone(), gw = w.grad().clone();
  x.set_grad({});
  w.set_grad({});
  Tensor y = autograd::checkpoint(block, {x, w});
  EXPECT_TENSOR_NEAR(y, Shape({4, 6}), test::values(block({x, w})), 1e-12);
  sum(y).backward();
  EXPECT_TENSOR_NEAR(x.grad(), Shape({4, 6}), test::values(gx), 1e-12);
  EXPECT_TENSOR_NEAR(w.grad(), Shape({6, 6}), test::values(gw), 1e-12);
  EXPECT_TRUE(autograd::gradcheck([&](const std::vector<Tensor>& in) { return autograd::checkpoint(block, in); },
                                  {f64({2, 6}), f64({6, 6})}));
}

// Peak CPU memory of forward + backward through a deep chain drops when segments are checkpointed.
TEST(Checkpoint, SavesActivationMemory) {
  set_num_threads(1);
  manual_seed(4);
  const int depth = 48, seg = 8;  // activations [512, 64] dominate; the weight is small
  Tensor w = (randn({64, 64}) * 0.1).requires_grad_();
  Tensor x = randn({512, 64});
  auto layer = [&](const Tensor& h) { return tanh(matmul(h, w)); };
  auto run = [&](bool use_ckpt) {
    w.set_grad({});
    cpu_reset_peak_memory_stats();
    const size_t base = cpu_memory_stats().bytes_in_use;
    Tensor h = x;
    for (int i = 0; i < depth; i += seg) {
      auto segment = [&](const std::vector<Tensor>& in) {
        Tensor t = in[0];
        for (int j = 0; j < seg; ++j) t = layer(t);
        return t;
      };
      // w is captured by `layer`, as a module's parameters are: it still gets its gradient
      h = use_ckpt ? autograd::checkpoint(segment, {h}) : segment({h});
    }
    sum(h).backward();
    return cpu_memory_stats().peak_bytes_in_use - base;
  };
  const size_t plain = run(false);
  Tensor g_plain = w.grad().clone();
  const size_t ckpt = run(true);
  EXPECT_TENSOR_NEAR(w.grad(), Shape({64, 64}), test::values(g_plain), 1e-5, 1e-4);
  std::cout << "peak bytes: plain " << plain << ", checkpointed " << ckpt << "\n";
  EXPECT_LT(ckpt * 2, plain);  // 48 layers of saved activations vs 6 segment inputs + one segment
}

TEST(Anomaly, NamesTheOpThatProducedNaN) {
  Tensor x = tensor<double>({0.0, 1.0}).requires_grad_();
  {
    autograd::DetectAnomalyGuard g;
    Tensor y = sum(sqrt(x));  // d sqrt / dx = inf at 0
    EXPECT_THROW_MSG(y.backward(), Error, "sqrt", "nan or inf", "recorded as sqrt");
  }
  Tensor y = sum(sqrt(x));  // without the guard: no check, inf flows into .grad
  y.backward();
  EXPECT_TRUE(std::isinf(x.grad().to_vector<double>()[0]));
}

// relu's backward is one fused op (BinaryOp::ReluBackward): the gradient where the output is > 0, exactly 0
// elsewhere — at 0, for negative inputs and for NaN outputs (as y > 0 is false there) — for relu and relu_,
// with a strided (expanded) incoming gradient.
TEST(Autograd, ReluBackwardMasksByTheOutput) {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = tensor<double>({-1.5, 0.0, 2.0, std::nan(""), 3.5, -0.0}, {6}).to(dt).requires_grad_();
    Tensor g = tensor<double>({7.0}, {1}).to(dt).expand({6});
    relu(x).backward(g);
    const std::vector<double> want = {0, 0, 7, 0, 7, 0};
    EXPECT_EQ(x.grad().to_vector<double>(), want) << dt;
    Tensor x2 = x.detach().clone().requires_grad_();
    Tensor h = x2 * 1.0;
    h.relu_();
    h.backward(g);
    EXPECT_EQ(x2.grad().to_vector<double>(), want) << dt << " (relu_)";
  }
}

// relu's and gelu's backward write into the incoming gradient when nothing else holds it (owns_gradient), and
// never into one that is held: by the caller of backward(), by a hook that kept it, or by a second consumer of
// the same gradient (add's backward hands one tensor to both inputs). Each graph's gradients must equal those of
// a run where hooks keep every gradient (so that no backward may write into any), bit for bit.
TEST(Autograd, ElementwiseBackwardWritesOnlyIntoGradientsItOwns) {
  manual_seed(31);
  const Tensor x0 = randn({4, 5});
  std::map<std::string, Tensor> kept;  // the gradients the hooks kept, by tensor
  Tensor z_kept;
  auto grads_of = [&](bool keep_all) {
    Tensor x = x0.clone().requires_grad_();
    Tensor a = x * 1.5;
    Tensor r = relu(a), u = gelu(a);
    Tensor z = r * 2.0 + u;  // a's gradient: the sum of relu's and gelu's backward of the same tensor
    if (keep_all) {
      z_kept = z.detach();
      for (auto [name, t] : {std::pair{"a", &a}, {"r", &r}, {"u", &u}, {"z", &z}})
        t->register_hook([&kept, name = std::string(name)](const Tensor& g) {
          kept[name] = g;
          return Tensor();
        });
    }
    sum(z * z).backward();
    return x.grad();
  };
  const Tensor plain = grads_of(false), held = grads_of(true);
  EXPECT_EQ(plain.to_vector<float>(), held.to_vector<float>());
  // the kept gradients were not written over by the backward that received them (relu's would mask r's)
  ASSERT_EQ(kept.size(), 4u);
  EXPECT_EQ(kept["z"].to_vector<float>(), (z_kept * 2.0).to_vector<float>());
  EXPECT_EQ(kept["r"].to_vector<float>(), (kept["z"] * 2.0).to_vector<float>());
  EXPECT_EQ(kept["u"].to_vector<float>(), kept["z"].to_vector<float>());

  // the caller's gradient is left as it was
  Tensor x = x0.clone().requires_grad_();
  const Tensor gy = randn({4, 5}), gy_before = gy.clone();
  relu(x * 1.0).backward(gy);
  EXPECT_EQ(gy.to_vector<float>(), gy_before.to_vector<float>());
  EXPECT_EQ(x.grad().to_vector<float>(), (gy * gt(x0, 0.0).to(kFloat32)).to_vector<float>());

  // a gradient the backward owns is written in place: relu's result is the buffer mul's backward made for it, which
  // the leaf then takes as its .grad
  Tensor w = x0.clone().requires_grad_();
  Tensor rw = relu(w);
  const void* incoming = nullptr;
  rw.register_hook([&incoming](const Tensor& g) {
    incoming = g.data_ptr();
    return Tensor();
  });
  sum(rw * 3.0).backward();
  EXPECT_EQ(w.grad().data_ptr(), incoming);
  EXPECT_EQ(w.grad().to_vector<float>(), (gt(x0, 0.0).to(kFloat32) * 3.0).to_vector<float>());
}

// The in-place writes against holders the handle count alone cannot see, and the in-place sums of two gradients:
// a hook keeping only a view (another handle on the same storage), autograd::grad capturing a non-leaf whose
// gradient then flows on into relu, x + x (one tensor handed twice to the same input) and a + relu(a).
TEST(Autograd, InPlaceGradientWritesRespectViewsCapturesAndSums) {
  manual_seed(37);
  const Tensor x0 = randn({3, 4});
  {  // a hook keeps only a detached view of relu's incoming gradient
    Tensor x = x0.clone().requires_grad_();
    Tensor r = relu(x * 1.0);
    Tensor view;
    r.register_hook([&view](const Tensor& g) {
      view = g.detach().reshape({12});
      return Tensor();
    });
    sum(r * 3.0).backward();
    EXPECT_EQ(view.to_vector<float>(), std::vector<float>(12, 3.0f));
  }
  {  // autograd::grad captures h's gradient; relu(h)'s backward must not write into it
    Tensor x = x0.clone().requires_grad_();
    Tensor h = x * 2.0;
    Tensor z = sum(relu(h) * 5.0);
    const std::vector<Tensor> g = autograd::grad({z}, {h, x});
    EXPECT_EQ(g[0].to_vector<float>(), (gt(h, 0.0).to(kFloat32) * 5.0).detach().to_vector<float>());
    EXPECT_EQ(g[1].to_vector<float>(), (gt(h, 0.0).to(kFloat32) * 10.0).detach().to_vector<float>());
  }
  // x + x and a + relu(a): the sums equal a run whose hooks keep every gradient (nothing written in place)
  auto grads_of = [&](bool keep) {
    std::vector<Tensor> kept;
    Tensor x = x0.clone().requires_grad_();
    Tensor a = x * 1.5;
    Tensor d = a + a;
    Tensor r = relu(d);
    Tensor z = d + r;
    if (keep)
      for (Tensor* t : {&a, &d, &r, &z})
        t->register_hook([&kept](const Tensor& g) {
          kept.push_back(g);
          return Tensor();
        });
    sum(z * z).backward();
    return x.grad();
  };
  EXPECT_EQ(grads_of(false).to_vector<float>(), grads_of(true).to_vector<float>());
  const Tensor d0 = x0 * 3.0, want = (2 * (d0 + relu(d0)) * (1 + gt(d0, 0.0).to(kFloat32))) * 3.0;
  EXPECT_EQ(grads_of(false).to_vector<float>(), want.to_vector<float>());
}

// apply() gets one gradient per output of its node, undefined for the outputs no gradient reached, whichever they
// are (node.h's convention); the last output unused once crashed a module's backward hook, which read g[1].
TEST(Engine, ANodeGetsOneGradientPerOutputWhicheverAreUsed) {
  Tensor x = full({2}, 2.0, {.dtype = kFloat64}).requires_grad_();
  for (int used = 0; used < 3; ++used) {
    Tensor a, b, c;
    {
      NoGradGuard g;
      a = x * 1.0;
      b = x * 2.0;
      c = x * 3.0;
    }
    std::vector<size_t> sizes_seen;
    autograd::record("ThreeOutputs", {x}, {a, b, c}).backward([&](const autograd::Grads& g) -> autograd::Grads {
      sizes_seen.push_back(g.size());
      Tensor sum_of = zeros({2}, {.dtype = kFloat64});
      for (size_t i = 0; i < g.size(); ++i)
        if (g[i].defined()) sum_of = sum_of + g[i] * static_cast<double>(i + 1);
      return {sum_of};
    });
    x.set_grad({});
    const Tensor& y = used == 0 ? a : used == 1 ? b : c;
    y.sum().backward();
    ASSERT_EQ(sizes_seen, std::vector<size_t>({3})) << "output " << used;
    EXPECT_TENSOR_NEAR(x.grad(), Shape({2}), std::vector<double>(2, used + 1.0), 1e-12);
  }
}
