# FindCUDNN: cuDNN (headers + libcudnn), for the CUDA backend's convolutions. Looks in CUDNN_ROOT (CMake
# variable or environment variable: e.g. a tarball install, or pip's site-packages/nvidia/cudnn), then the
# CUDA toolkit, then the system paths. Defines CUDNN_FOUND, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY and the
# imported target CUDNN::cudnn. Installed next to emberConfig.cmake, so consumers find it the same way.
set(_cudnn_hints ${CUDNN_ROOT} $ENV{CUDNN_ROOT})
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _cudnn_hints ${CUDAToolkit_LIBRARY_ROOT})
endif()
if(CUDAToolkit_TARGET_DIR)
  list(APPEND _cudnn_hints ${CUDAToolkit_TARGET_DIR})
endif()
find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cudnn_hints} PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_cudnn_hints} PATH_SUFFIXES lib64 lib lib/x64)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                                                INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
