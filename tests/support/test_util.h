// defines: test helpers — float64 reference tensors, element comparisons, error-message assertions, index
// walks for computing broadcast references in the tests themselves, and EMBER_SKIP_IF_NO_CUDA.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <ember/ember.h>

namespace ember::test {

// A fresh, empty folder <system temp>/ember_<tag>_<pid> for a test's files (the pid keeps test processes that
// ctest runs side by side apart).
inline std::filesystem::path tmpdir(const std::string& tag) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("ember_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// All elements as doubles, in row-major order, whatever the dtype, layout or device.
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Calls f(index) for every multi-index of `shape` in row-major order.
inline void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  if (shape.numel() == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t n = 0; n < shape.numel(); ++n) {
    f(idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Row-major offset into a tensor of `shape` for an index of a (possibly larger) broadcast shape.
inline int64_t bcast_offset(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t off = 0;
  const size_t lead = idx.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + (shape[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

// Expects t to have `shape` and elements equal to `ref` within atol + rtol * |ref| (NaNs must match).
inline ::testing::AssertionResult tensor_near(const Tensor& t, const Shape& shape, const std::vector<double>& ref,
                                              double atol = 1e-5, double rtol = 1e-5) {
  if (t.shape() != shape) {
    std::ostringstream os;
    os << "shape " << t.shape() << " != expected " << shape;
    return ::testing::AssertionFailure() << os.str();
  }
  std::vector<double> v = values(t);
  if (v.size() != ref.size())
    return ::testing::AssertionFailure() << v.size() << " values vs " << ref.size() << " expected";
  for (size_t i = 0; i < v.size(); ++i) {
    bool ok = (std::isnan(v[i]) && std::isnan(ref[i])) || v[i] == ref[i] ||
              std::fabs(v[i] - ref[i]) <= atol + rtol * std::fabs(ref[i]);
    if (!ok) return ::testing::AssertionFailure() << "element " << i << ": got " << v[i] << ", expected " << ref[i];
  }
  return ::testing::AssertionSuccess();
}

// A CPU memory limit (set_memory_limit) for a scope; restored to none whatever the test does.
struct CpuLimitGuard {
  explicit CpuLimitGuard(size_t bytes) { set_memory_limit(Device::cpu(), bytes); }
  ~CpuLimitGuard() { set_memory_limit(Device::cpu(), 0); }
  CpuLimitGuard(const CpuLimitGuard&) = delete;
  CpuLimitGuard& operator=(const CpuLimitGuard&) = delete;
};
// The message of the OutOfMemoryError f throws, or "" when it throws none.
inline std::string oom_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const OutOfMemoryError& e) {
    return e.what();
  }
  return "";
}

}  // namespace ember::test

#define EXPECT_TENSOR_NEAR(t, shape, ref, ...) \
  EXPECT_TRUE(::ember::test::tensor_near((t), (shape), (ref), ##__VA_ARGS__))

// Expects `stmt` to throw ErrT whose message contains every one of the given substrings.
#define EXPECT_THROW_MSG(stmt, ErrT, ...) \
  do { \
    bool thrown_ = false; \
    try { \
      stmt; \
    } catch (const ErrT& e_) { \
      thrown_ = true; \
      std::string msg_ = e_.what(); \
      for (const char* sub_ : {__VA_ARGS__}) \
        EXPECT_NE(msg_.find(sub_), std::string::npos) << "message \"" << msg_ << "\" lacks \"" << sub_ << "\""; \
    } catch (const std::exception& e_) { \
      ADD_FAILURE() << "expected " #ErrT ", got another exception: " << e_.what(); \
      thrown_ = true; \
    } \
    if (!thrown_) ADD_FAILURE() << "expected " #ErrT " from: " #stmt; \
  } while (0)

namespace ember::test {
// EMBER_REQUIRE_CUDA=1 (set by scripts/gpu-check.sh on the GPU machine): a CUDA test that would skip fails
// instead, so a GPU run in which CUDA did not come up cannot look green.
inline bool cuda_required() {
  const char* v = std::getenv("EMBER_REQUIRE_CUDA");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}
}  // namespace ember::test

namespace ember::test {
// A tensor that claims to live on cuda:0 over the host buffer `buf`, for the device checks of ops: without a GPU,
// every op on it must throw DeviceError before touching it. With a GPU, from_blob itself refuses host memory as
// the device's (checked here: the first kernel to read it would crash the process) and an undefined tensor comes
// back: the caller's op checks are then skipped.
template <class T>
Tensor host_memory_claiming_cuda(T* buf, const Shape& shape) {
  const TensorOptions opts{.dtype = dtype_of<T>::value, .device = Device::cuda()};
  if (!cuda::is_available()) return from_blob(buf, shape, opts);
  EXPECT_THROW_MSG(from_blob(buf, shape, opts), DeviceError, "from_blob", "cuda:0", "host memory");
  return Tensor();
}
}  // namespace ember::test

#define EMBER_SKIP_IF_NO_CUDA() \
  do { \
    if (!::ember::cuda::is_available()) { \
      if (::ember::test::cuda_required()) \
        GTEST_FAIL() << "EMBER_REQUIRE_CUDA is set, but no CUDA device: " << ::ember::cuda::unavailable_reason(); \
      GTEST_SKIP() << "no CUDA device: " << ::ember::cuda::unavailable_reason(); \
    } \
  } while (0)
