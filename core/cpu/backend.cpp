// defines: this kernel variant's one CpuBackend (isa.h), and, in the AVX-512 plugin, the entry point core opens
// it by.
#include <string>

#include "cpu_backend.h"

namespace ember::cpu::inline EMBER_CPU_ISA_NS {

CpuBackend& variant_backend() {
  static CpuBackend* b = new CpuBackend();  // never destroyed: storages freed at exit may still use it
  return *b;
}

}  // namespace ember::cpu::inline EMBER_CPU_ISA_NS

#ifdef EMBER_CPU_PLUGIN
extern "C" __attribute__((visibility("default"))) ember::Backend* ember_cpu_backend_plugin(int version,
                                                                                           std::string* why) {
  if (version != ember::cpu::kCpuPluginVersion) {
    *why = "a CPU kernel plugin from another build (interface version " +
           std::to_string(ember::cpu::kCpuPluginVersion) + ", asked for " + std::to_string(version) + ")";
    return nullptr;
  }
  return &ember::cpu::EMBER_CPU_ISA_NS::variant_backend();
}
#endif
