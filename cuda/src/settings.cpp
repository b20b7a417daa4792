// defines: process-wide CUDA settings that exist in every build (the scalar-access guard, TF32).
#include <atomic>

#include "ember/cuda/cuda.h"

namespace ember::cuda {
namespace {
std::atomic<bool> g_allow_scalar{false};
std::atomic<bool> g_allow_tf32{false};
}
void set_allow_scalar(bool allow) { g_allow_scalar.store(allow); }
bool allow_scalar() { return g_allow_scalar.load(); }
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }
}  // namespace ember::cuda
