// defines: the calls core makes into cuda/src in a CUDA build — declared here, defined there. They are
// direct calls, never a static registrar (a static library would drop a registrar object silently).
// Private to core/src and cuda/src; no CUDA headers.
#pragma once
#include <string>

#include "ember/config.h"

#if EMBER_WITH_CUDA
namespace ember {
class Backend;
class Tensor;
}  // namespace ember

namespace ember::cuda::detail {
// The CUDA backend of device `device_index`, or null with the reason in *why when it is unusable.
Backend* backend_or_null(int device_index, std::string* why);
// A copy of the CPU tensor `t` in pinned (page-locked) host memory; requires a usable CUDA device.
Tensor pin(const Tensor& t);
}  // namespace ember::cuda::detail
#endif
