# ember_module(<name> [DEPS <module>...] SOURCES <file>...): one module of the layered build (core, autograd, nn,
# optim, data) as an OBJECT library `ember_<name>`. Its public headers are <folder>/include (ember/<name>/...);
# it sees the headers of the modules it names in DEPS (and theirs), and nothing else, so a module that includes a
# header of a layer above it fails to compile. The objects of every module are bundled into the one installed
# library, libember (root CMakeLists.txt); cmake/EmberLayers.cmake also links each module with only its DEPS to
# prove it uses no symbol from above.
set(EMBER_CXX_FLAGS ${EMBER_ISA_FLAGS} -fno-math-errno -fno-trapping-math -fno-semantic-interposition -Wall -Wextra)
function(ember_module name)
  cmake_parse_arguments(M "" "" "DEPS;SOURCES" ${ARGN})
  set(target ember_${name})
  add_library(${target} OBJECT ${M_SOURCES})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  target_compile_features(${target} PUBLIC cxx_std_20)
  # -fno-math-errno: sqrt and friends need not set errno (nothing reads it), which lets loops vectorise.
  # -fno-trapping-math: Ember never enables floating-point traps, so the compiler may evaluate both sides of a
  # floating select (scalar_math.h's branch-free exp is vectorised only then); no result changes: rounding,
  # NaN and signed-zero rules stay IEEE. C++ sources only: nvcc takes none of these flags.
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${EMBER_CXX_FLAGS}>")
  foreach(dep IN LISTS M_DEPS)
    target_link_libraries(${target} PUBLIC ember_${dep})
  endforeach()
  set_property(GLOBAL APPEND PROPERTY EMBER_MODULES ${name})
  set_property(GLOBAL PROPERTY EMBER_MODULE_DEPS_${name} ${M_DEPS})
  set_property(GLOBAL APPEND PROPERTY EMBER_PUBLIC_INCLUDE_DIRS ${CMAKE_CURRENT_SOURCE_DIR}/include)
endfunction()

# ember_uses_plugins(<target>): <target> runs against libember, so the plugins libember may open at run time (the
# CUDA backend, the AVX-512 CPU kernels) are built before it, even when only it is asked for (make demo).
function(ember_uses_plugins target)
  foreach(plugin IN ITEMS ember_cuda ember_cpu_avx512 ember_dist_mpi ember_dist_nccl)
    if(TARGET ${plugin})
      add_dependencies(${target} ${plugin})
    endif()
  endforeach()
endfunction()
