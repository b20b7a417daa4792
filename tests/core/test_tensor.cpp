// Tests of the tensor core's foundations: dtypes and half conversions, shapes, devices, creation functions,
// random generators, the CPU caching allocator, element access, printing and the no-GPU behaviour.
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "test_util.h"

using namespace ember;

TEST(DType, SizesNamesAndPromotion) {
  EXPECT_EQ(itemsize(kFloat32), 4u);
  EXPECT_EQ(itemsize(kFloat64), 8u);
  EXPECT_EQ(itemsize(kFloat16), 2u);
  EXPECT_EQ(itemsize(kBFloat16), 2u);
  EXPECT_EQ(itemsize(kInt64), 8u);
  EXPECT_EQ(itemsize(kInt32), 4u);
  EXPECT_EQ(itemsize(kUInt8), 1u);
  EXPECT_EQ(itemsize(kBool), 1u);
  EXPECT_STREQ(name(kBFloat16), "bfloat16");
  EXPECT_EQ(promote_types(kInt64, kFloat32), kFloat32);
  EXPECT_EQ(promote_types(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promote_types(kInt32, kInt64), kInt64);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promote_types(kFloat16, kFloat64), kFloat64);
  EXPECT_EQ(promote_types(kUInt8, kFloat16), kFloat16);
  EXPECT_TRUE(is_floating(kBFloat16));
  EXPECT_FALSE(is_floating(kInt32));
}

// Every one of the 65536 float16 bit patterns survives half -> float -> half (NaNs stay NaN), and the
// conversion from float rounds to nearest even.
TEST(DType, HalfConversionsExhaustive) {
  for (uint32_t b = 0; b < 65536; ++b) {
    Half h = Half::from_bits(static_cast<uint16_t>(b));
    float f = h;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(Half(f)))) << b;
    } else {
      ASSERT_EQ(Half(f).bits, b) << "bits " << b << " value " << f;
    }
  }
  EXPECT_EQ(static_cast<float>(Half(1.0f + std::ldexp(1.0f, -11))), 1.0f);  // tie: round to even (down)
  EXPECT_EQ(static_cast<float>(Half(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));  // tie: up
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(65519.0f)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(static_cast<float>(Half(std::ldexp(1.0f, -26))), 0.0f);
}

TEST(DType, BFloat16Conversions) {
  for (uint32_t b = 0; b < 65536; ++b) {
    BFloat16 h = BFloat16::from_bits(static_cast<uint16_t>(b));
    float f = h;
    if (std::isnan(f)) EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(f))));
    else ASSERT_EQ(BFloat16(f).bits, b);
  }
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
}

TEST(Shape, BasicsAndBroadcast) {
  Shape s{64, 784};
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1], 784);
  EXPECT_EQ(s.numel(), 64 * 784);
  EXPECT_EQ(Shape(std::vector<int64_t>{64, 784}), s);
  std::ostringstream os;
  os << s;
  EXPECT_EQ(os.str(), "[64, 784]");
  Shape big{1, 2, 3, 4, 5, 6, 7, 8};  // beyond the inline capacity
  big.erase(0);
  big.insert(0, 9);
  EXPECT_EQ(big, (Shape{9, 2, 3, 4, 5, 6, 7, 8}));
  big.resize(2);
  EXPECT_EQ(big, (Shape{9, 2}));
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(broadcast_shapes({4, 1, 3}, {5, 1}, "add"), (Shape{4, 5, 3}));
  EXPECT_THROW_MSG(broadcast_shapes({2, 3}, {4}, "add"), ShapeError, "add", "[2, 3]", "[4]");
  EXPECT_THROW_MSG(normalize_dim(2, 2, "sum"), IndexError, "sum", "dim 2");
  EXPECT_EQ(normalize_dim(-1, 3, "sum"), 2);
}

TEST(Device, Basics) {
  EXPECT_EQ(Device::cpu().to_string(), "cpu");
  EXPECT_EQ(Device::cuda(1).to_string(), "cuda:1");
  EXPECT_TRUE(Device::cuda().is_cuda());
  EXPECT_EQ(Device::cuda().index(), 0);
  EXPECT_NE(Device::cpu(), Device::cuda());
}

TEST(Factory, CreationFunctions) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_EQ(z.device(), Device::cpu());
  EXPECT_TENSOR_NEAR(z, Shape({2, 3}), std::vector<double>(6, 0.0));
  EXPECT_TENSOR_NEAR(ones({4}, {.dtype = kInt32}), Shape({4}), std::vector<double>(4, 1.0));
  EXPECT_TENSOR_NEAR(full({2}, 2.5, {.dtype = kFloat64}), Shape({2}), std::vector<double>({2.5, 2.5}));
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_TENSOR_NEAR(a, Shape({5}), std::vector<double>({0, 1, 2, 3, 4}));
  EXPECT_TENSOR_NEAR(arange(1, 2, 0.25, {.dtype = kFloat32}), Shape({4}), std::vector<double>({1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(0).numel(), 0);
  {  // each value is fma(i, step, start) rounded once (backend.h's arange; the CUDA kernel gives the same bits)
    const Tensor f = arange(0.1, 7000, 1.1, {.dtype = kFloat64});
    const std::vector<double> got = test::values(f);
    ASSERT_EQ(got.size(), 6364u);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], std::fma(static_cast<double>(i), 1.1, 0.1)) << i;
  }
  Tensor t = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TENSOR_NEAR(t, Shape({2, 3}), std::vector<double>({1, 2, 3, 4, 5, 6}));
  Tensor tb = tensor<bool>({true, false});
  EXPECT_EQ(tb.dtype(), kBool);
  EXPECT_EQ(tb.to_vector<bool>(), std::vector<bool>({true, false}));
  EXPECT_EQ(empty({0, 3}).numel(), 0);
  EXPECT_THROW_MSG(zeros({2, -1}), ShapeError, "negative size", "[2, -1]");
  // Sizes whose product overflows: an error, not a wrapped count (empty ones too: their strides would overflow).
  EXPECT_THROW_MSG(empty({int64_t{1} << 40, int64_t{1} << 40}), ShapeError, "too large", "overflows int64");
  EXPECT_THROW_MSG(empty({0, int64_t{1} << 40, int64_t{1} << 40}), ShapeError, "too large");
  EXPECT_THROW_MSG(from_blob(nullptr, {0, int64_t{1} << 62, 4}, {.dtype = kFloat64}), ShapeError, "from_blob", "too large");
  EXPECT_THROW_MSG(tensor<float>({1, 2, 3}, {2, 2}), ShapeError, "3 values", "[2, 2]");
  EXPECT_THROW_MSG(arange(0, 1, 0), ValueError, "arange");
  EXPECT_THROW_MSG(zeros({2}, {.dtype = kInt64, .requires_grad = true}), DTypeError, "floating");
  Tensor like = zeros_like(t);
  EXPECT_EQ(like.shape(), t.shape());
}

TEST(Factory, FromBlobSharesMemory) {
  std::vector<double> buf = {1, 2, 3, 4};
  bool freed = false;
  {
    Tensor t = from_blob(buf.data(), {2, 2}, {.dtype = kFloat64}, [&](void*) { freed = true; });
    t.mul_(2);
    EXPECT_EQ(t.data<double>(), buf.data());
  }
  EXPECT_TRUE(freed);
  EXPECT_EQ(buf, std::vector<double>({2, 4, 6, 8}));
}

TEST(Random, SameSeedSameNumbersWhateverTheThreads) {
  set_num_threads(1);
  manual_seed(42);
  std::vector<double> a = test::values(randn({100003}));
  std::vector<double> u1 = test::values(rand({5000}));
  set_num_threads(2);
  manual_seed(42);
  std::vector<double> b = test::values(randn({100003}));
  std::vector<double> u2 = test::values(rand({5000}));
  EXPECT_EQ(a, b);
  EXPECT_EQ(u1, u2);
  manual_seed(43);
  EXPECT_NE(test::values(randn({16})), std::vector<double>(a.begin(), a.begin() + 16));
  // successive draws continue the stream instead of repeating it
  manual_seed(42);
  std::vector<double> first = test::values(randn({8})), second = test::values(randn({8}));
  EXPECT_NE(first, second);
}

TEST(Random, Distributions) {
  manual_seed(7);
  const int64_t n = 200000;
  std::vector<double> u = test::values(rand({n}, {.dtype = kFloat64}));
  double mean = 0, var = 0;
  for (double v : u) {
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    mean += v / n;
  }
  EXPECT_NEAR(mean, 0.5, 0.01);
  std::vector<double> z = test::values(randn({n}));
  mean = 0;
  for (double v : z) mean += v / n;
  for (double v : z) var += (v - mean) * (v - mean) / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
  std::vector<double> r = test::values(randint(-3, 4, {n}));
  std::vector<int> counts(7, 0);
  for (double v : r) {
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    ++counts[static_cast<size_t>(v + 3)];
  }
  for (int c : counts) EXPECT_NEAR(c, n / 7.0, n / 7.0 * 0.05);
  std::vector<double> p = test::values(randperm(1000));
  std::vector<double> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_THROW_MSG(randint(3, 3, {2}), ValueError, "randint");
  EXPECT_THROW_MSG(randn({2}, {.dtype = kInt64}), DTypeError, "normal");
}

// A steady loop (the same shapes each step) is served from the cache after its first iteration.
TEST(Allocator, SteadyLoopMakesNoSystemAllocations) {
  set_num_threads(2);
  Tensor w = randn({128, 784}), x = randn({64, 784}), b = randn({128});
  auto step = [&] {
    Tensor h = relu(linear(x, w, b));
    Tensor p = softmax(h, 1);
    Tensor l = mean(log(p + 1e-6));
    Tensor c = conv2d(randn({4, 1, 28, 28}), randn({8, 1, 5, 5}), {}, {1}, {2});
    return l.item() + sum(max_pool2d(c, {2})).item();
  };
  step();
  CpuMemoryStats before = cpu_memory_stats();
  for (int i = 0; i < 20; ++i) step();
  CpuMemoryStats after = cpu_memory_stats();
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_GT(after.requests, before.requests + 20 * 5);
  EXPECT_EQ(after.cache_hits - before.cache_hits, after.requests - before.requests);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
}

TEST(Allocator, StatsAndEmptyCache) {
  cpu_empty_cache();
  CpuMemoryStats s0 = cpu_memory_stats();
  EXPECT_EQ(s0.bytes_cached, 0u);
  cpu_reset_peak_memory_stats();
  {
    Tensor t = empty({1000}, {.dtype = kFloat64});  // 8000 bytes, rounded up to a size class
    CpuMemoryStats s1 = cpu_memory_stats();
    EXPECT_GE(s1.bytes_in_use, s0.bytes_in_use + 8000);
    EXPECT_LE(s1.bytes_in_use, s0.bytes_in_use + 9000);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u);
  }
  CpuMemoryStats s2 = cpu_memory_stats();
  EXPECT_GE(s2.peak_bytes_in_use, s0.bytes_in_use + 8000);
  EXPECT_GE(s2.bytes_cached, 8000u);
  cpu_empty_cache();
  CpuMemoryStats s3 = cpu_memory_stats();
  EXPECT_EQ(s3.bytes_cached, 0u);
  EXPECT_GT(s3.system_frees, s2.system_frees);
  EXPECT_NE(cpu_memory_summary().find("peak in use"), std::string::npos);
}

// Blocks of 2 MiB or more start on a 2 MiB boundary (so that transparent huge pages can back them, on Linux) and
// count their size class, as smaller ones do; their values are whole.
TEST(Allocator, LargeBlocksStartOnHugePageBoundaries) {
  cpu_empty_cache();
  CpuMemoryStats s0 = cpu_memory_stats();
  {
    Tensor t = arange(0, 600000, 1, {.dtype = kFloat64});  // 4.8 MB: a size class of 5 MiB
    CpuMemoryStats s1 = cpu_memory_stats();
    EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use + (5u << 20));
#ifdef __linux__
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % (2u << 20), 0u);
#endif
    EXPECT_EQ(t.data<double>()[599999], 599999.0);
    EXPECT_EQ(sum(t, {0}).item<double>(), 599999.0 * 600000.0 / 2);
  }
  cpu_empty_cache();
  EXPECT_EQ(cpu_memory_stats().bytes_cached, 0u);
}

TEST(Tensor, ElementAccessChecks) {
  Tensor t = tensor<float>({1.5f, 2.5f});
  EXPECT_FLOAT_EQ(t.data<float>()[1], 2.5f);
  EXPECT_THROW_MSG(t.data<double>(), DTypeError, "float32", "float64");
  EXPECT_THROW_MSG(t.item<float>(), ShapeError, "item", "2 elements");
  EXPECT_EQ(t.slice(0, 1, 2).item<float>(), 2.5f);
  EXPECT_EQ(t.slice(0, 1, 2).item<int64_t>(), 2);
  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_THROW_MSG(undefined.shape(), Error, "undefined");
  EXPECT_THROW_MSG(relu(undefined), Error, "relu", "undefined");
  EXPECT_FALSE(t.grad().defined());
}

TEST(Tensor, PrintsValuesShapeDtypeDevice) {
  std::ostringstream os;
  os << tensor<float>({1, -2.5f, 3, 4}, {2, 2});
  EXPECT_EQ(os.str(),
            "tensor([[ 1.0000, -2.5000],\n        [ 3.0000,  4.0000]], dtype=float32, shape=[2, 2], device=cpu)");
  std::ostringstream big;
  big << arange(5000).reshape({50, 100});
  EXPECT_NE(big.str().find("..."), std::string::npos);
  EXPECT_LT(big.str().size(), 2000u);  // summarised, not 5000 numbers
  std::ostringstream b;
  b << tensor<bool>({true, false});
  EXPECT_NE(b.str().find("true, false"), std::string::npos);
}

TEST(NoGpu, CudaReportsUnavailableAndRefusesClearly) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present; this test is about machines without one";
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_FALSE(cuda::unavailable_reason().empty());
  EXPECT_THROW_MSG(randn({2}).to(Device::cuda()), DeviceError, "cuda:0");
  EXPECT_THROW_MSG(zeros({2}, {.device = Device::cuda()}), DeviceError, "cuda:0");
  EXPECT_THROW_MSG(randn({2}).pin_memory(), DeviceError, "cuda");
  EXPECT_FALSE(randn({2}).is_pinned());
  EXPECT_THROW(cuda::synchronize(), DeviceError);
  EXPECT_FALSE(cuda::allow_scalar());
}
