// defines: the CUDA entry points for a build without CUDA (EMBER_CUDA=OFF or no nvcc): no devices, and a
// DeviceError that says why wherever a device would be needed.
#include "ember/core/backend.h"
#include "ember/core/error.h"
#include "ember/cuda/cuda.h"

namespace ember::cuda {
namespace {
constexpr const char* kWhy = "ember was built without CUDA support (EMBER_CUDA=OFF or no nvcc at build time)";
}
bool is_available() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return kWhy; }
int current_device() { throw DeviceError(detail::str("cuda::current_device: ", kWhy)); }
void set_device(int) { throw DeviceError(detail::str("cuda::set_device: ", kWhy)); }
std::string get_device_name(int) { throw DeviceError(detail::str("cuda::get_device_name: ", kWhy)); }
void synchronize() { throw DeviceError(detail::str("cuda::synchronize: ", kWhy)); }
}  // namespace ember::cuda
