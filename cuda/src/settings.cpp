// defines: process-wide CUDA settings that exist in every build (the scalar-access guard).
#include <atomic>

#include "ember/cuda/cuda.h"

namespace ember::cuda {
namespace {
std::atomic<bool> g_allow_scalar{false};
}
void set_allow_scalar(bool allow) { g_allow_scalar.store(allow); }
bool allow_scalar() { return g_allow_scalar.load(); }
}  // namespace ember::cuda
