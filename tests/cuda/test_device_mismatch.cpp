// tests: ops given tensors on two devices throw a DeviceError naming the op and both devices, before any
// kernel runs. These run on every machine: the "CUDA" tensors here are host memory labelled cuda:0 (a
// storage made with the from-blob constructor), which is safe because the device check comes first and
// nothing ever reads them.
#include <gtest/gtest.h>

#include <ember/core/raw_ops.h>
#include <ember/core/tensor_impl.h>

#include "test_util.h"

namespace ember {
namespace {

Tensor labelled_cuda(const Shape& s, DType dt = kFloat32) {
  const size_t nbytes = static_cast<size_t>(s.numel()) * itemsize(dt);
  auto* data = new char[nbytes > 0 ? nbytes : 1]();
  auto storage =
      std::make_shared<StorageImpl>(data, nbytes, Device::cuda(0), [](void* p) { delete[] static_cast<char*>(p); });
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, s, contiguous_strides(s), dt));
}

TEST(DeviceMismatch, ElementwiseOpsNameTheOpAndBothDevices) {
  Tensor c = ones({2, 3}), g = labelled_cuda({2, 3});
  ASSERT_TRUE(g.is_cuda());
  EXPECT_THROW_MSG(c + g, DeviceError, "add", "cpu", "cuda:0");
  EXPECT_THROW_MSG(g * c, DeviceError, "mul", "cuda:0", "cpu");
  EXPECT_THROW_MSG(maximum(c, g), DeviceError, "maximum", "cpu", "cuda:0");
  EXPECT_THROW_MSG(lt(c, g), DeviceError, "lt", "cpu", "cuda:0");
  EXPECT_THROW_MSG(c.add_(g), DeviceError, "add", "cpu", "cuda:0");
  EXPECT_THROW_MSG(where(gt(c, 0.0), c, g), DeviceError, "where", "cpu", "cuda:0");
  EXPECT_THROW_MSG(where(labelled_cuda({2, 3}, kBool), c, c), DeviceError, "where", "cuda:0", "cpu");
}

TEST(DeviceMismatch, LinalgShapeAndIndexOpsNameTheOpAndBothDevices) {
  EXPECT_THROW_MSG(matmul(ones({2, 3}), labelled_cuda({3, 4})), DeviceError, "matmul", "cpu", "cuda:0");
  EXPECT_THROW_MSG(linear(ones({2, 3}), labelled_cuda({4, 3})), DeviceError, "linear", "cpu", "cuda:0");
  EXPECT_THROW_MSG(linear(ones({2, 3}), ones({4, 3}), labelled_cuda({4})), DeviceError, "linear", "cpu", "cuda:0");
  EXPECT_THROW_MSG(conv2d(ones({1, 2, 5, 5}), labelled_cuda({3, 2, 3, 3})), DeviceError, "conv2d", "cpu", "cuda:0");
  EXPECT_THROW_MSG(conv2d(ones({1, 2, 5, 5}), ones({3, 2, 3, 3}), labelled_cuda({3})), DeviceError, "conv2d", "cpu",
                   "cuda:0");
  EXPECT_THROW_MSG(cat({ones({2, 3}), labelled_cuda({2, 3})}), DeviceError, "cat", "cpu", "cuda:0");
  EXPECT_THROW_MSG(index_select(labelled_cuda({4, 3}), 0, tensor<int64_t>({0, 1}, {2})), DeviceError, "index_select",
                   "cuda:0", "cpu");
  EXPECT_THROW_MSG(raw::max_pool2d_backward(labelled_cuda({1, 1, 2, 2}), ones({1, 1, 4, 4}), {2}, {2}, {0}),
                   DeviceError, "max_pool2d", "cuda:0", "cpu");
  EXPECT_THROW_MSG(raw::conv2d_backward(labelled_cuda({1, 3, 3, 3}), ones({1, 2, 5, 5}), ones({3, 2, 3, 3}), {1}, {0},
                                        true, true, true),
                   DeviceError, "conv2d_backward", "cuda:0", "cpu");
  EXPECT_THROW_MSG(raw::index_add_zeros({4, 3}, 0, tensor<int64_t>({0, 1}, {2}), labelled_cuda({2, 3})), DeviceError,
                   "index_add", "cuda:0", "cpu");
}

TEST(DeviceMismatch, LossesNameTheOpAndBothDevices) {
  EXPECT_THROW_MSG(nn::mse_loss(labelled_cuda({4, 3}), ones({4, 3})), DeviceError, "mse_loss", "cuda:0", "cpu");
  EXPECT_THROW_MSG(nn::cross_entropy(labelled_cuda({4, 3}), tensor<int64_t>({0, 1, 2, 0}, {4})), DeviceError,
                   "cross_entropy", "cuda:0", "cpu");
}

}  // namespace
}  // namespace ember
