# FindCudnnFrontend: NVIDIA's header-only cuDNN frontend (cudnn_frontend.h), for the CUDA backend's fused attention.
# Looks in CUDNN_FRONTEND_ROOT (CMake or environment variable), then where scripts/install-deps.sh puts PyPI's
# nvidia-cudnn-frontend (~/.cache/ember/cudnn-frontend). Defines CudnnFrontend_FOUND, CUDNN_FRONTEND_INCLUDE_DIR and
# the imported target CudnnFrontend::headers.
set(_fe_cache "$ENV{XDG_CACHE_HOME}")
if(NOT _fe_cache)
  set(_fe_cache "$ENV{HOME}/.cache")
endif()
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
          HINTS ${CUDNN_FRONTEND_ROOT} $ENV{CUDNN_FRONTEND_ROOT} "${_fe_cache}/ember/cudnn-frontend"
          PATH_SUFFIXES include NO_DEFAULT_PATH)
find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CudnnFrontend REQUIRED_VARS CUDNN_FRONTEND_INCLUDE_DIR)
if(CudnnFrontend_FOUND AND NOT TARGET CudnnFrontend::headers)
  add_library(CudnnFrontend::headers INTERFACE IMPORTED)
  set_target_properties(CudnnFrontend::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_FRONTEND_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_FRONTEND_INCLUDE_DIR)
