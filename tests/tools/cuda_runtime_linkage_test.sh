#!/usr/bin/env bash
# The CUDA plugin uses the shared CUDA runtime, the one cuBLAS, cuDNN and NCCL use: libcudart.so is NEEDED, and no
# copy of the static runtime (cudart_static) is linked in. CMake's default for CUDA targets is the static one.
#   usage: cuda_runtime_linkage_test.sh LIB_DIR        (exit 77: skipped, no CUDA plugin in this build)
set -uo pipefail
for lib in "$1"/libember_cuda.so "$1"/libember_dist_nccl.so; do
  [ -f "$lib" ] || { [ "$(basename "$lib")" = libember_cuda.so ] && { echo "SKIP: no CUDA plugin"; exit 77; }; continue; }
  readelf -d "$lib" | grep -q 'NEEDED.*\[libcudart\.so\.' || { echo "FAIL: $lib does not need libcudart.so"; exit 1; }
  # the static runtime would define the runtime API inside the plugin
  if nm -D --defined-only "$lib" | grep -qE ' (cudaMalloc|cudaLaunchKernel|cudaStreamSynchronize)$'; then
    echo "FAIL: $lib defines CUDA runtime functions (a static cudart is linked in)"; exit 1
  fi
  if nm --defined-only "$lib" 2>/dev/null | grep -q 'cudart_static\|__cudart[0-9]'; then
    echo "FAIL: $lib holds the static CUDA runtime's own symbols"; exit 1
  fi
  echo "ok: $lib"
done
echo PASS
