# The AVX-512 variant of the CPU kernels (core/cpu/isa.h): the kernel sources of core/cpu compiled again with
# AVX-512 F/BW/DQ/VL and 512-bit vectors, into their own namespace (ember::cpu::avx512), as a plugin that libember
# opens with dlopen (RTLD_LOCAL) only on a CPU that runs it — so no AVX-512 instruction can reach the rest of the
# process, not even through an inline function or template instantiated in both. x86-64 only.
if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" OR EMBER_NATIVE)
  return()
endif()
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag("-mavx512f -mavx512bw -mavx512dq -mavx512vl" EMBER_HAVE_AVX512_FLAGS)
if(NOT EMBER_HAVE_AVX512_FLAGS)
  return()
endif()
add_library(ember_cpu_avx512 MODULE ${EMBER_CPU_KERNEL_SOURCES})
set_target_properties(ember_cpu_avx512 PROPERTIES OUTPUT_NAME ember_cpu_avx512 PREFIX lib
                      INSTALL_RPATH "\$ORIGIN")
target_compile_definitions(ember_cpu_avx512 PRIVATE EMBER_CPU_ISA_NS=avx512 EMBER_CPU_PLUGIN=1)
# (GCC 12 warns falsely about its own AVX-512 intrinsics headers: -Wno-maybe-uninitialized)
target_compile_options(ember_cpu_avx512 PRIVATE ${EMBER_CXX_FLAGS} -mavx512f -mavx512bw -mavx512dq -mavx512vl
                                                -mprefer-vector-width=512 -Wno-maybe-uninitialized)
target_include_directories(ember_cpu_avx512 PRIVATE ${PROJECT_SOURCE_DIR}/core/cpu ${PROJECT_SOURCE_DIR}/core/internal)
target_link_libraries(ember_cpu_avx512 PRIVATE ember Eigen3::Eigen)
if(OpenMP_CXX_FOUND)
  target_link_libraries(ember_cpu_avx512 PRIVATE OpenMP::OpenMP_CXX)
endif()
# The native bf16 GEMM kernels (core/cpu/bf16_gemm.h) live in the plugin too, their one file built with AVX512-BF16
# and AMX where the compiler and assembler know them; libember looks them up only on a CPU that runs them.
set(_bf16_flags -mavx512bf16 -mamx-tile -mamx-bf16)
include(CheckCXXSourceCompiles)
string(REPLACE ";" " " CMAKE_REQUIRED_FLAGS "-mavx512f -mavx512bw -mavx512vl ${_bf16_flags}")
check_cxx_source_compiles([[
#include <immintrin.h>
int main() {
  alignas(64) static unsigned char cfg[64] = {1};
  _tile_loadconfig(cfg); _tile_zero(0); _tile_dpbf16ps(0, 1, 2); _tile_release();
  __m512 a = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)_mm512_set1_epi32(1), (__m512bh)_mm512_set1_epi32(1));
  return (int)_mm512_reduce_add_ps(a);
}]] EMBER_HAVE_BF16_KERNELS)
unset(CMAKE_REQUIRED_FLAGS)
if(EMBER_HAVE_BF16_KERNELS)
  target_sources(ember_cpu_avx512 PRIVATE ${PROJECT_SOURCE_DIR}/core/cpu/bf16_gemm_native.cpp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/core/cpu/bf16_gemm_native.cpp TARGET_DIRECTORY ember_cpu_avx512
                              PROPERTIES COMPILE_OPTIONS "${_bf16_flags}")
endif()
install(TARGETS ember_cpu_avx512 LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
