// defines: the error paths of EMBER_CUDA_CHECK / EMBER_CUDA_WARN (check.h): the exception thrown for a
// failed CUDA call, and the line logged instead where throwing is not allowed (destructors).
#include "check.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "ember/core/error.h"

namespace ember::cuda::detail {
namespace {
const char* base_name(const char* file) {
  const char* slash = std::strrchr(file, '/');
  return slash ? slash + 1 : file;
}
std::string message(cudaError_t err, const char* expr, const char* file, int line) {
  return ember::detail::str("CUDA error: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err), " in `", expr, "` (",
                            base_name(file), ":", line, ")");
}
}  // namespace

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  // Clear the thread's last-error slot, so the next launch check does not report this error again. (A sticky
  // error, such as an illegal address, stays with the context whatever we do.)
  (void)cudaGetLastError();
  if (err == cudaErrorMemoryAllocation) throw OutOfMemoryError(message(err, expr, file, line));
  throw DeviceError(message(err, expr, file, line));
}

void throw_library_error(const char* library, const char* status, bool out_of_memory, const char* expr,
                         const char* file, int line) {
  std::string msg =
      ember::detail::str(library, " error: ", status, " in `", expr, "` (", base_name(file), ":", line, ")");
  if (out_of_memory) throw OutOfMemoryError(msg);
  throw DeviceError(msg);
}

void warn_cuda_error(cudaError_t err, const char* expr, const char* file, int line) noexcept {
  (void)cudaGetLastError();
  // The runtime is being torn down at process exit (objects freed during static destruction): nothing to
  // release any more and nothing worth reporting.
  if (err == cudaErrorCudartUnloading) return;
  try {
    std::fprintf(stderr, "ember: warning: %s\n", message(err, expr, file, line).c_str());
  } catch (...) {  // no memory for the message: say less
    std::fprintf(stderr, "ember: warning: CUDA error %d in `%s`\n", static_cast<int>(err), expr);
  }
}
}  // namespace ember::cuda::detail
