// defines: Tensor (a cheap handle: copies share storage), TensorOptions, Scalar, SortResult, and the Tensor members
// of API.md. Differentiable members (views, clone, to(DType), index_select, ...) are defined in autograd/.
//
//   Tensor x = ember::randn({64, 784});
//   Tensor y = x.reshape({64, 28, 28}).transpose(1, 2).contiguous();
//   std::cout << y.slice(0, 0, 2) << "\n";
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string_view>
#include <vector>

#include "ember/core/device.h"
#include "ember/core/dtype.h"
#include "ember/core/error.h"
#include "ember/core/memory_format.h"
#include "ember/core/shape.h"
#include "ember/core/tensor_impl.h"

namespace ember {

class Generator;
namespace autograd {
class HookHandle;
}  // namespace autograd

struct TensorOptions {
  DType dtype = kFloat32;
  Device device = Device::cpu();
  bool requires_grad = false;
  Generator* generator = nullptr;  // random creation functions only: draw from this generator (generator.h)
};

// A number in an op with a tensor: `x * 2`, `x + 0.5`. Remembers whether it was written as an integer so
// that int tensor + 0.5 gives float32 while int tensor + 1 stays integer (as in PyTorch).
struct Scalar {
  double value = 0;
  bool integral = false;
  bool boolean = false;           // written as a bool: bool tensor + true stays bool, bool tensor + 1 gives int64
  Scalar(double v) : value(v) {}  // NOLINT
  Scalar(float v) : value(v) {}   // NOLINT
  Scalar(int v) : value(v), integral(true) {}                                 // NOLINT
  Scalar(long v) : value(static_cast<double>(v)), integral(true) {}           // NOLINT
  Scalar(long long v) : value(static_cast<double>(v)), integral(true) {}      // NOLINT
  Scalar(unsigned v) : value(v), integral(true) {}                            // NOLINT
  Scalar(unsigned long v) : value(static_cast<double>(v)), integral(true) {}  // NOLINT
  Scalar(bool v) : value(v), integral(true), boolean(true) {}                 // NOLINT
};

struct SortResult;  // {values, indices} of sort and topk, defined below Tensor

namespace cuda {
bool allow_scalar();  // cuda/: whether element access to CUDA memory is allowed
class Stream;         // ember/cuda/stream.h
}  // namespace cuda

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- metadata
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return checked()->sizes; }
  const Shape& sizes() const { return checked()->sizes; }
  const Shape& strides() const { return checked()->strides; }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t dim() const { return static_cast<int64_t>(checked()->sizes.size()); }
  int64_t numel() const { return checked()->numel; }
  int64_t storage_offset() const { return checked()->offset; }
  DType dtype() const { return checked()->dtype; }
  size_t itemsize() const { return ember::itemsize(dtype()); }
  Device device() const { return checked()->device(); }
  bool is_contiguous() const { return checked()->contiguous; }
  // Dense in format f (memory_format.h): x.is_contiguous(MemoryFormat::ChannelsLast) for an NHWC-ordered [N, C, H, W].
  bool is_contiguous(MemoryFormat f) const;
  // ChannelsLast for a 4-D tensor dense in channels-last order (and not also plainly contiguous), else Contiguous:
  // the layout ops give their outputs (PyTorch's rule for dense tensors).
  MemoryFormat suggest_memory_format() const;
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  uint32_t version() const { return checked()->storage->version.load(std::memory_order_relaxed); }

  // --- element access (CPU; a CUDA tensor throws unless cuda::set_allow_scalar(true))
  void* data_ptr() const;  // address of element 0 (any device)
  template <class T>
  T* data() const {
    check_host_access("data");
    EMBER_CHECK_DTYPE(dtype_of_v<T> == dtype(), "data: tensor has dtype ", dtype(), " but data<", name(dtype_of_v<T>),
                      ">() was requested");
    return static_cast<T*>(impl_->data_ptr());
  }
  template <class T>
  T item() const {  // read as T itself: a trip through double would round int64 values beyond 2^53
    T v{};
    item_checked(dtype_of_v<T>, &v);
    return v;
  }
  double item() const { return item_double_checked(dtype()); }
  template <class T>
  std::vector<T> to_vector() const;  // copies to host, any device, any layout

  // --- copies, devices and dtypes
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;
  Tensor cuda() const { return to(Device::cuda()); }
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor pin_memory() const;  // a copy in pinned host memory (itself when already pinned); needs CUDA
  bool is_pinned() const;
  bool is_meta() const { return checked()->storage->meta; }  // made by memory::plan: a shape with no values
  // Tells the CUDA caching allocator that work queued on `stream` uses this tensor's memory, so that once
  // freed it is not reused before that work is done (needed when a tensor allocated on one stream is used
  // on another). Throws DeviceError for a CPU tensor or a stream of another device. Defined in cuda/.
  void record_stream(const cuda::Stream& stream) const;
  Tensor contiguous() const;
  // Itself when already dense in format f, else a copy in it (differentiable; the gradient comes back as it goes).
  Tensor contiguous(MemoryFormat f) const;
  Tensor clone() const;  // keeps a channels-last tensor's layout (PyTorch's preserve_format)
  Tensor clone(MemoryFormat f) const;
  Tensor detach() const;
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor& fill_(Scalar v);
  Tensor& zero_() { return fill_(0); }

  // --- views (share storage) and index ops
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor t() const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t d) const;
  Tensor unsqueeze(int64_t d) const;
  Tensor expand(const Shape& shape) const;

  // --- in place (bump the storage's version counter)
  Tensor& add_(const Tensor& o);
  Tensor& add_(Scalar s);
  Tensor& sub_(const Tensor& o);
  Tensor& sub_(Scalar s);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(Scalar s);
  Tensor& div_(const Tensor& o);
  Tensor& div_(Scalar s);
  Tensor& relu_();
  Tensor& clamp_(double lo, double hi);

  // --- math: the ops of ember/autograd/ops.h as members, as in libtorch (x.sum() is ember::sum(x)); defined in
  // autograd/. max() and min() reduce over every element (over some dims: ember::max(x, dims, keepdim)).
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor var() const;
  Tensor var(const std::vector<int64_t>& dims, bool keepdim = false, int64_t correction = 1) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor norm(double p = 2, const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  SortResult sort(int64_t dim = -1, bool descending = false) const;
  SortResult topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor square() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor matmul(const Tensor& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(Scalar exponent) const;
  Tensor clamp(double lo, double hi) const;

  // Makes this handle's tensor (and every other handle on the same impl) use src's data and metadata:
  // how a module moves its parameters to another device or dtype without breaking references to them.
  void set_data(const Tensor& src);

  // --- autograd (defined in autograd/)
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // leaves only; floating dtypes only
  Tensor grad() const;                     // undefined until a gradient has been accumulated
  void set_grad(const Tensor& g);          // replace (or, with an undefined tensor, clear) .grad
  bool is_leaf() const;                    // not computed by a recorded op
  // The op that computed it ("" for leaves); compares by value: t.grad_fn_name() == "matmul".
  std::string_view grad_fn_name() const;
  // Accumulates d(this)/d(leaf) into every leaf's .grad; `grad` defaults to 1 for a one-element tensor.
  void backward(const Tensor& grad = {}, bool retain_graph = false) const;
  // Runs hook(grad) each time a gradient with respect to this tensor is computed, before it is used (added into
  // .grad, passed further back, or returned by autograd::grad); a defined return value replaces the gradient.
  // The tensor must require grad. Defined in autograd/ (hooks.h declares HookHandle).
  autograd::HookHandle register_hook(std::function<Tensor(const Tensor&)> hook) const;

 private:
  TensorImpl* checked() const {
    if (!impl_) [[unlikely]]
      detail::fail<Error>("Tensor: operation on an undefined tensor (an empty handle)");
    return impl_.get();
  }
  void check_host_access(const char* what) const;
  double item_double_checked(DType want) const;
  void item_checked(DType want, void* out) const;  // the one element, converted to `want`, into *out
  std::shared_ptr<TensorImpl> impl_;
};

// What sort and topk return, as PyTorch's (values, indices): `auto [values, indices] = x.sort();`.
struct SortResult {
  Tensor values;
  Tensor indices;  // kInt64
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Converts `src` to a contiguous host buffer of T (used by to_vector; any dtype, any device).
void copy_to_host_as(const Tensor& src, DType want, void* dst);

template <class T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out(static_cast<size_t>(numel()));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> tmp(out.size());
    copy_to_host_as(*this, kBool, tmp.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = tmp[i] != 0;
  } else {
    copy_to_host_as(*this, dtype_of_v<T>, out.data());
  }
  return out;
}

}  // namespace ember
