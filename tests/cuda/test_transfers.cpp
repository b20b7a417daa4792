// tests: copies between the CPU and a GPU and on a GPU — round trips for every dtype, strided and
// broadcast sources, dtype-converting copy_, factories and fill_ on CUDA views, pinned memory and
// non_blocking, the scalar-access guard, to_vector and printing. Each result is compared with the same
// operation done on the CPU.
#include <sstream>

#include "test_util.h"

namespace ember {
namespace {

using test::values;

const DType kAllDTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kUInt8, kBool};
const Device kCuda = Device::cuda();

// 0, 1, ..., 23 as [2, 3, 4] in `dt` (exact in every dtype; bool gives one false then trues).
Tensor sample(DType dt) { return arange(24, {.dtype = kFloat64}).reshape({2, 3, 4}).to(dt); }

// Values that test conversion edges: fractions, negatives, out of integer range, NaN and infinities.
Tensor edge_values() {
  const double inf = std::numeric_limits<double>::infinity();
  return tensor<double>({-1.5, -0.5, 0.0, 0.5, 1.5, 255.5, 300.7, -300.7, 65504.0, 1e10, -1e10,
                         std::numeric_limits<double>::quiet_NaN(), inf, -inf});
}

// Restores the scalar-access guard when a test ends, even on failure.
struct AllowScalar {
  explicit AllowScalar(bool on) : before(cuda::allow_scalar()) { cuda::set_allow_scalar(on); }
  ~AllowScalar() { cuda::set_allow_scalar(before); }
  bool before;
};

TEST(CudaTransfer, RoundTripEveryDtype) {
  EMBER_SKIP_IF_NO_CUDA();
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(name(dt));
    Tensor x = sample(dt);
    Tensor g = x.to(kCuda);
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.dtype(), dt);
    EXPECT_EQ(g.shape(), x.shape());
    Tensor back = g.cpu();
    EXPECT_TRUE(back.is_cpu());
    EXPECT_EQ(values(back), values(x));
  }
}

TEST(CudaTransfer, NonContiguousSourcesBothWays) {
  EMBER_SKIP_IF_NO_CUDA();
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(name(dt));
    Tensor x = sample(dt);
    Tensor xt = x.transpose(0, 2);             // [4, 3, 2], strided
    Tensor xs = x.slice(2, 0, 4, 2);           // every other column
    EXPECT_EQ(values(xt.cuda()), values(xt));  // host -> device from a strided host tensor
    EXPECT_EQ(values(xs.cuda()), values(xs));
    Tensor g = x.cuda();
    EXPECT_EQ(values(g.transpose(0, 2).cpu()), values(xt));  // device -> host from a strided device view
    EXPECT_EQ(values(g.slice(2, 0, 4, 2).cpu()), values(xs));
    EXPECT_EQ(values(g.permute({1, 2, 0}).contiguous()), values(x.permute({1, 2, 0})));  // on the device
    EXPECT_TRUE(g.transpose(0, 2).contiguous().is_cuda());
  }
}

TEST(CudaTransfer, BroadcastSources) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor row = tensor<float>({1, 2, 3});
  Tensor ref = row.expand({4, 3}).contiguous();
  EXPECT_EQ(values(row.expand({4, 3}).cuda()), values(ref));  // host broadcast -> device
  Tensor d = zeros({4, 3}, {.device = kCuda});
  d.copy_(row);  // host row broadcast into a device tensor
  EXPECT_EQ(values(d), values(ref));
  Tensor e = zeros({4, 3}, {.device = kCuda});
  e.copy_(row.cuda());  // device row broadcast on the device
  EXPECT_EQ(values(e), values(ref));
  Tensor h = zeros({4, 3});
  h.copy_(row.cuda());  // device row broadcast into a host tensor
  EXPECT_EQ(values(h), values(ref));
  EXPECT_EQ(values(row.cuda().expand({4, 3}).cpu()), values(ref));
}

TEST(CudaTransfer, DtypeConvertingCopiesMatchTheCpu) {
  EMBER_SKIP_IF_NO_CUDA();
  for (DType from : kAllDTypes) {
    Tensor x = from == kBool ? sample(kBool) : edge_values().to(from);
    Tensor gx = x.cuda();
    for (DType to : kAllDTypes) {
      SCOPED_TRACE(std::string(name(from)) + " -> " + name(to));
      const std::vector<double> ref = values(x.to(to));  // the CPU's conversion
      Tensor h2d = empty(x.shape(), {.dtype = to, .device = kCuda});
      h2d.copy_(x);  // host -> device, converted on the device
      EXPECT_TENSOR_NEAR(h2d, x.shape(), ref, 0, 0);
      Tensor d2d = empty(x.shape(), {.dtype = to, .device = kCuda});
      d2d.copy_(gx);  // on the device
      EXPECT_TENSOR_NEAR(d2d, x.shape(), ref, 0, 0);
      EXPECT_TENSOR_NEAR(gx.to(to), x.shape(), ref, 0, 0);  // cast on the device
      Tensor d2h = empty(x.shape(), {.dtype = to});
      d2h.copy_(gx);  // device -> host, converted on the host
      EXPECT_TENSOR_NEAR(d2h, x.shape(), ref, 0, 0);
    }
  }
}

TEST(CudaTransfer, CopyIntoStridedDeviceViews) {
  EMBER_SKIP_IF_NO_CUDA();
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(name(dt));
    Tensor src = sample(dt).reshape({6, 4});
    Tensor host = zeros({4, 6}, {.dtype = dt});
    Tensor dev = zeros({4, 6}, {.dtype = dt, .device = kCuda});
    host.t().copy_(src);
    dev.t().copy_(src);  // host -> strided device view
    EXPECT_EQ(values(dev), values(host));
    Tensor host2 = zeros({4, 12}, {.dtype = dt});
    Tensor dev2 = zeros({4, 12}, {.dtype = dt, .device = kCuda});
    host2.slice(1, 0, 12, 2).copy_(host);
    dev2.slice(1, 0, 12, 2).copy_(dev);  // device -> strided device view
    EXPECT_EQ(values(dev2), values(host2));
  }
}

TEST(CudaTransfer, FactoriesOnTheDevice) {
  EMBER_SKIP_IF_NO_CUDA();
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(name(dt));
    const TensorOptions o{.dtype = dt, .device = kCuda};
    Tensor z = zeros({3, 5}, o), one = ones({3, 5}, o), f = full({3, 5}, 2, o), e = empty({3, 5}, o);
    for (const Tensor& t : {z, one, f, e}) {
      EXPECT_TRUE(t.is_cuda());
      EXPECT_EQ(t.dtype(), dt);
      EXPECT_EQ(t.shape(), Shape({3, 5}));
    }
    EXPECT_EQ(values(z), std::vector<double>(15, 0.0));
    EXPECT_EQ(values(one), std::vector<double>(15, 1.0));
    EXPECT_EQ(values(f), values(full({3, 5}, 2, {.dtype = dt})));
    Tensor a = arange(6, {.dtype = dt, .device = kCuda});
    EXPECT_EQ(values(a), values(arange(6, {.dtype = dt})));
  }
  Tensor t = tensor<float>({1.5f, -2, 3}, {3}, {.dtype = kFloat32, .device = kCuda});
  EXPECT_TRUE(t.is_cuda());
  EXPECT_EQ(values(t), (std::vector<double>{1.5, -2, 3}));
  Tensor n = zeros({0, 3}, {.device = kCuda});
  EXPECT_EQ(n.cpu().numel(), 0);
  EXPECT_EQ(n.to_vector<float>().size(), 0u);
}

TEST(CudaTransfer, FillAndZeroOnDeviceViews) {
  EMBER_SKIP_IF_NO_CUDA();
  for (DType dt : kAllDTypes) {
    SCOPED_TRACE(name(dt));
    Tensor host = sample(dt).reshape({4, 6});
    Tensor dev = host.cuda();
    host.slice(1, 0, 6, 2).fill_(5);
    dev.slice(1, 0, 6, 2).fill_(5);  // every other column
    host.select(0, 2).zero_();
    dev.select(0, 2).zero_();  // one row
    host.t().slice(0, 5, 6).fill_(1);
    dev.t().slice(0, 5, 6).fill_(1);  // the last column, through a transpose
    EXPECT_EQ(values(dev), values(host));
  }
  // Conversion of the fill value follows the CPU (saturation, NaN -> 0, bool).
  for (DType dt : kAllDTypes) {
    for (double v : {-1.5, 300.7, 1e10, std::numeric_limits<double>::quiet_NaN()}) {
      SCOPED_TRACE(std::string(name(dt)) + " " + std::to_string(v));
      Tensor dev = empty({3}, {.dtype = dt, .device = kCuda});
      dev.fill_(v);
      EXPECT_TENSOR_NEAR(dev, Shape({3}), values(full({3}, v, {.dtype = dt})), 0, 0);
    }
  }
}

TEST(CudaTransfer, PinnedNonBlockingHostToDevice) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor x = arange(1 << 20, {.dtype = kFloat32}).pin_memory();
  ASSERT_TRUE(x.is_pinned());
  Tensor g = x.to(kCuda, /*non_blocking=*/true);
  cuda::current_stream().synchronize();
  EXPECT_EQ(values(g), values(x));
  // Into an existing device tensor, with a dtype change on the device.
  Tensor d = empty({1 << 20}, {.dtype = kFloat64, .device = kCuda});
  d.copy_(x, /*non_blocking=*/true);
  cuda::current_stream().synchronize();
  EXPECT_EQ(values(d), values(x));
}

TEST(CudaTransfer, PageableHostToDeviceIsSynchronous) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor x = full({1 << 22}, 1.0);
  Tensor g = x.to(kCuda, /*non_blocking=*/true);  // pageable: non_blocking cannot apply
  x.fill_(2.0);                                   // the copy has finished reading x when to() returns
  std::vector<float> v = g.to_vector<float>();
  size_t wrong = 0;
  for (float f : v) wrong += f != 1.0f;
  EXPECT_EQ(wrong, 0u);
}

TEST(CudaTransfer, NonBlockingDeviceToPinnedHost) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor g = full({1 << 20}, 3.0, {.device = kCuda});
  Tensor host = zeros({1 << 20}).pin_memory();
  ASSERT_TRUE(host.is_pinned());
  host.copy_(g, /*non_blocking=*/true);
  cuda::current_stream().synchronize();  // needed before reading host
  EXPECT_EQ(values(host), std::vector<double>(1 << 20, 3.0));
}

TEST(CudaTransfer, NonBlockingDeviceToPageableHostIsSynchronous) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor g = full({1 << 20}, 3.0, {.device = kCuda});
  Tensor host = zeros({1 << 20});
  host.copy_(g, /*non_blocking=*/true);  // pageable destination: waits
  const float* p = host.data<float>();
  EXPECT_EQ(p[0], 3.0f);
  EXPECT_EQ(p[(1 << 20) - 1], 3.0f);
}

TEST(CudaTransfer, PinMemory) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor x = sample(kFloat32);
  EXPECT_FALSE(x.is_pinned());
  Tensor p = x.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_TRUE(p.is_cpu());
  EXPECT_FALSE(x.is_pinned());
  EXPECT_EQ(values(p), values(x));
  EXPECT_TRUE(p.pin_memory().is_same(p));      // already pinned: itself
  Tensor pt = x.transpose(0, 2).pin_memory();  // strided source: a contiguous pinned copy
  EXPECT_TRUE(pt.is_pinned());
  EXPECT_TRUE(pt.is_contiguous());
  EXPECT_EQ(values(pt), values(x.transpose(0, 2)));
  EXPECT_THROW_MSG(x.cuda().pin_memory(), DeviceError, "only CPU tensors");
}

TEST(CudaTransfer, ScalarAccessGuard) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor g = full({1}, 2.5, {.device = kCuda});
  {
    AllowScalar off(false);
    EXPECT_THROW_MSG(g.item(), DeviceError, "set_allow_scalar");
    EXPECT_THROW_MSG(g.item<float>(), DeviceError, "set_allow_scalar");
    EXPECT_THROW_MSG(g.data<float>(), DeviceError, "set_allow_scalar");
    EXPECT_EQ(g.to_vector<float>(), std::vector<float>{2.5f});  // always allowed
    EXPECT_EQ(g.cpu().item<float>(), 2.5f);
  }
  {
    AllowScalar on(true);
    EXPECT_EQ(g.item<float>(), 2.5f);
    EXPECT_EQ(g.item(), 2.5);
    EXPECT_EQ(g.to(kInt64).item<int64_t>(), 2);
    EXPECT_NE(g.data<float>(), nullptr);  // a device address: not for dereferencing on the host
  }
}

TEST(CudaTransfer, PrintingShowsTheValues) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor g = tensor<float>({1.5f, -2, 3}).cuda();
  std::ostringstream dev, host;
  dev << g;
  host << g.cpu();
  const std::string s = dev.str();
  EXPECT_NE(s.find("1.5000"), std::string::npos) << s;
  EXPECT_NE(s.find("device=cuda:0"), std::string::npos) << s;
  std::string expected = host.str();
  expected.replace(expected.find("device=cpu"), std::string("device=cpu").size(), "device=cuda:0");
  EXPECT_EQ(s, expected);
}

TEST(CudaTransfer, RecordStream) {
  EMBER_SKIP_IF_NO_CUDA();
  cuda::Stream side = cuda::Stream::create();
  Tensor g = zeros({16}, {.device = kCuda});
  EXPECT_NO_THROW(g.record_stream(side));
  EXPECT_NO_THROW(g.slice(0, 4, 8).record_stream(side));
  EXPECT_THROW_MSG(ones({4}).record_stream(side), DeviceError, "record_stream", "CUDA tensor");
}

TEST(CudaTransfer, NonBlockingWorksOnASideStream) {
  EMBER_SKIP_IF_NO_CUDA();
  Tensor x = arange(1 << 16, {.dtype = kFloat32}).pin_memory();
  cuda::Stream side = cuda::Stream::create();
  Tensor g;
  cuda::Event copied;
  {
    cuda::StreamGuard guard(side);
    g = x.to(kCuda, /*non_blocking=*/true);
    copied.record(side);
  }
  copied.block(cuda::current_stream());  // the default stream's later work waits for the copy
  g.record_stream(cuda::current_stream());
  EXPECT_EQ(values(g), values(x));
}

}  // namespace
}  // namespace ember
