// defines: the CPU kernel variants. The kernels of core/cpu (every file that defines a CpuBackend member, with
// gemm.h, loops.h and vec_math.h) are compiled once per instruction set, each copy in its own namespace named by
// EMBER_CPU_ISA_NS: `avx2` (x86-64-v3: AVX2 + FMA), built into libember and able to run everywhere Ember does,
// and `avx512` (AVX-512 F/BW/DQ/VL, 512-bit vectors), built as the plugin libember_cpu_avx512.so, which core opens
// only on a CPU that runs it. The variant is chosen once per process (active_isa): EMBER_CPU_ISA=avx2|avx512 if
// set, else AVX-512 where the CPU and OS support it and it is known to pay (Intel), AVX2 otherwise. The rest of
// core/cpu (the thread pool, the scratch arenas) is compiled once and shared by the variants.
#pragma once
#include <string>

#ifndef EMBER_CPU_ISA_NS
#define EMBER_CPU_ISA_NS avx2
#endif

namespace ember {
class Backend;
}

namespace ember::cpu {

enum class Isa { Avx2, Avx512 };
const char* name(Isa isa);

// Whether this CPU and its OS (the XSAVE state it enables) can run the variant: CPUID and XGETBV.
bool supports(Isa isa);
// The variant in use, chosen on first call (see above).
Isa active_isa();
// Why the variant in use is not the one asked for or the widest supported ("" when it is), e.g. a plugin that
// could not be loaded.
std::string active_isa_note();
// The CPU backend of the variant in use (opens libember_cpu_avx512.so for avx512).
Backend& active_backend();

// The AVX-512 plugin's entry point, looked up with dlsym.
using CpuPluginEntry = Backend* (*)(int version, std::string* why);
inline constexpr const char* kCpuPluginEntryName = "ember_cpu_backend_plugin";
inline constexpr int kCpuPluginVersion = 1;

}  // namespace ember::cpu
