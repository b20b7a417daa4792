# Build switches. EMBER_CUDA lives in EmberCuda.cmake.
option(EMBER_BUILD_TESTS "Build the GoogleTest suites" ${PROJECT_IS_TOP_LEVEL})
option(EMBER_BUILD_BENCH "Build the benchmarks (Google Benchmark)" ${PROJECT_IS_TOP_LEVEL})
option(EMBER_BUILD_EXAMPLES "Build the examples" ${PROJECT_IS_TOP_LEVEL})
option(EMBER_SANITIZE "Build with AddressSanitizer + UndefinedBehaviorSanitizer" OFF)
option(EMBER_TSAN "Build with ThreadSanitizer (make tsan: the threaded suites only)" OFF)
option(EMBER_FUZZ "Build the readers' libFuzzer targets (clang; make fuzz) instead of the tests" OFF)
option(EMBER_NATIVE "Compile for this machine's CPU (-march=native) instead of x86-64-v3 (AVX2 + FMA)" OFF)

# Portable default ISA: AVX2 + FMA. On the Zen 4 build machine Eigen's float GEMM is faster this way than with
# -march=native (AVX-512 runs as two halves there).
set(EMBER_ISA_FLAGS "")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  if(EMBER_NATIVE)
    set(EMBER_ISA_FLAGS -march=native)
  else()
    set(EMBER_ISA_FLAGS -mavx2 -mfma -mf16c)
  endif()
endif()

if(EMBER_SANITIZE)
  # C++ only: nvcc takes none of these (CUDA sources are not instrumented).
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  # --as-needed again: the sanitizer runtime's link spec turns it off, and the CUDA plugin would then need the driver
  # stub's libcuda.so.1 (pulled in with NVRTC, no symbol used), which a machine without a GPU driver lacks.
  add_link_options(-fsanitize=address,undefined -Wl,--as-needed)
endif()

if(EMBER_TSAN)
  if(EMBER_SANITIZE)
    message(FATAL_ERROR "EMBER_TSAN and EMBER_SANITIZE cannot be combined (ThreadSanitizer excludes AddressSanitizer)")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=thread)
endif()

if(EMBER_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "EMBER_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  # Coverage instrumentation and sanitizers everywhere; the fuzz executables add libFuzzer's main.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  # --as-needed again: the sanitizer runtime's link spec turns it off, and the CUDA plugin would then need the driver
  # stub's libcuda.so.1 (pulled in with NVRTC, no symbol used), which a machine without a GPU driver lacks.
  add_link_options(-fsanitize=address,undefined -Wl,--as-needed)
endif()
