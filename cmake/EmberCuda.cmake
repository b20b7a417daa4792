# EMBER_CUDA=AUTO|ON|OFF: AUTO builds the CUDA parts when nvcc is found. Sets EMBER_WITH_CUDA to 0 or 1.
set(EMBER_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE EMBER_CUDA PROPERTY STRINGS AUTO ON OFF)
set(EMBER_WITH_CUDA 0)
if(NOT EMBER_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)  # never "native": build machines have no GPU
    endif()
    # The shared CUDA runtime (CMake's default for CUDA targets is the static one, which put both libcudart.so
    # and -lcudart_static on the plugin's link line): one runtime per process, the one cuBLAS and cuDNN use.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(EMBER_WITH_CUDA 1)
    # cuDNN is optional: without it CUDA conv2d throws DeviceError (everything else works).
    list(APPEND CMAKE_MODULE_PATH ${CMAKE_CURRENT_LIST_DIR})
    find_package(CUDNN QUIET)
    # NVIDIA's header-only cuDNN frontend (scripts/install-deps.sh, from PyPI), for fused attention; optional.
    find_package(CudnnFrontend QUIET)
  elseif(EMBER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "EMBER_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
set(EMBER_WITH_CUDNN 0)
set(EMBER_WITH_CUDNN_FRONTEND 0)
if(EMBER_WITH_CUDA AND CUDNN_FOUND)
  set(EMBER_WITH_CUDNN 1)
  if(CudnnFrontend_FOUND)
    set(EMBER_WITH_CUDNN_FRONTEND 1)
  endif()
endif()
message(STATUS "ember: CUDA backend ${EMBER_WITH_CUDA} (EMBER_CUDA=${EMBER_CUDA}), cuDNN ${EMBER_WITH_CUDNN}, "
               "cuDNN frontend (fused attention) ${EMBER_WITH_CUDNN_FRONTEND}")
