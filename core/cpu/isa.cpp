// defines: the choice of CPU kernel variant (isa.h): what the CPU and OS support (CPUID, XGETBV), the policy, the
// EMBER_CPU_ISA override, and the loading of the AVX-512 variant's plugin. Compiled once, into libember.
#include "isa.h"

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define EMBER_X86 1
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bf16_gemm.h"
#include "cpu_backend.h"
#include "ember/core/error.h"
#include "ember/internal/plugin_loader.h"

namespace ember::cpu {
namespace {

struct CpuId {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
CpuId cpuid(unsigned leaf, unsigned sub = 0) {
  CpuId r;
#ifdef EMBER_X86
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return {};
#else
  (void)leaf, (void)sub;  // not x86: no variant beyond the build's own (reported as "avx2")
#endif
  return r;
}
bool bit(unsigned v, int i) { return (v >> i) & 1u; }

// The register state the OS saves and restores (XCR0), 0 when it does not enable XSAVE.
uint64_t os_saved_state() {
  if (!bit(cpuid(1).c, 27)) return 0;  // OSXSAVE
  unsigned lo = 0, hi = 0;
#ifdef EMBER_X86
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
#endif
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

struct Choice {
  Isa isa = Isa::Avx2;
  Backend* backend = nullptr;
  std::string note;
};

// The AVX-512 variant's backend from its plugin, or null with the reason.
Backend* load_avx512(std::string* why) {
  std::string tried, opened;
  auto entry = reinterpret_cast<CpuPluginEntry>(detail::find_plugin_entry(
      detail::plugin_candidates("libember_cpu_avx512.so"), kCpuPluginEntryName, &tried, &opened));
  if (!entry) {
    *why = "the AVX-512 kernels (libember_cpu_avx512.so) could not be loaded:" + tried;
    return nullptr;
  }
  Backend* b = entry(kCpuPluginVersion, why);
  if (!b) *why = opened + ": " + *why;
  return b;
}

Choice choose() {
  Choice c;
  // AVX-512 wherever the CPU has it, measured faster on every one that does: Intel's server cores (Xeon model 167:
  // 230 GFLOP/s per core against 122 with AVX2), AMD's Zen 4 (which splits 512-bit vectors into two halves: cnn-b64
  // and mlp-big 3-7% faster on one core, family 25 model 17) and Zen 5 (full width: 263 against 131 GFLOP/s per
  // core; cnn-b64 1.75x, mlp-big 1.8x, family 26 model 2). EMBER_CPU_ISA=avx2 asks for the other variant.
  Isa want = supports(Isa::Avx512) ? Isa::Avx512 : Isa::Avx2;
  const char* env = std::getenv("EMBER_CPU_ISA");
  const bool asked = env && *env;
  if (asked) {
    if (!std::strcmp(env, "avx2")) want = Isa::Avx2;
    else if (!std::strcmp(env, "avx512")) want = Isa::Avx512;
    else c.note = detail::str("EMBER_CPU_ISA=", env, " is not avx2 or avx512; ignored");
  }
  if (want == Isa::Avx512 && !supports(Isa::Avx512)) {
    c.note = "EMBER_CPU_ISA=avx512, but this CPU (or its OS) cannot run AVX-512 F/BW/DQ/VL";
    want = Isa::Avx2;
  }
  if (want == Isa::Avx512) {
    std::string why;
    if ((c.backend = load_avx512(&why))) {
      c.isa = Isa::Avx512;
      return c;
    }
    c.note = why;
  }
  if (asked && !c.note.empty()) std::fprintf(stderr, "ember: %s; using the AVX2 kernels\n", c.note.c_str());
  c.isa = Isa::Avx2;
  c.backend = &avx2::variant_backend();
  return c;
}

const Choice& choice() {
  static const Choice c = choose();
  return c;
}

}  // namespace

const char* name(Isa isa) { return isa == Isa::Avx512 ? "avx512" : "avx2"; }

bool supports(Isa isa) {
  const uint64_t xcr0 = os_saved_state();
  const bool avx_state = (xcr0 & 0x6) == 0x6;  // SSE and AVX registers
  const CpuId l1 = cpuid(1), l7 = cpuid(7);
  const bool avx2 = avx_state && bit(l1.c, 28) && bit(l1.c, 12) && bit(l7.b, 5);  // AVX, FMA, AVX2
  if (isa == Isa::Avx2) return avx2;
  // AVX-512 F, DQ, BW and VL, with the opmask and upper ZMM state enabled by the OS
  return avx2 && (xcr0 & 0xE0) == 0xE0 && bit(l7.b, 16) && bit(l7.b, 17) && bit(l7.b, 30) && bit(l7.b, 31);
}

bool supports(Bf16Path p) {
  if (p == Bf16Path::None) return true;
  // Both kernels are built with AVX-512 (bf16_gemm_native.cpp); every CPU with either instruction set has it.
  if (!supports(Isa::Avx512)) return false;
  if (p == Bf16Path::Avx512Bf16) return bit(cpuid(7, 1).a, 5);
  // AMX-TILE and AMX-BF16, the tile configuration and data state enabled by the OS (XCR0 bits 17 and 18), and
  // Linux's permission to use that state, which a process must ask for before its first tile instruction.
  const CpuId l7 = cpuid(7);
  if (!bit(l7.d, 24) || !bit(l7.d, 22) || ((os_saved_state() >> 17) & 3) != 3) return false;
  static const bool granted = [] {
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, static_cast<long>(kReqXcompPerm), static_cast<long>(kXfeatureXtiledata)) == 0;
#else
    return false;
#endif
  }();
  return granted;
}

Isa active_isa() { return choice().isa; }
std::string active_isa_note() { return choice().note; }
Backend& active_backend() { return *choice().backend; }

}  // namespace ember::cpu
